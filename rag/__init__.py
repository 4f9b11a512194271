"""The framework-free RAG core (see README.md)."""

# Load order matters: usearch's compiled module carries its own static C++ runtime, and a C++
# library loaded after it breaks (measured here with onnxruntime 1.22-1.32: a segfault on
# import, or "Type parameter (T) of Optype (Mul) bound to different types" when a session
# opens; torch.onnx's exporter spins for minutes). Loaded before usearch, onnxruntime works
# (rag/encoders.py OnnxEncoder). Importing it costs little (its time: docs/benchmarks.md,
# "Figures behind the code's constants"); without it the other encoders work.
try:
    import onnxruntime  # noqa: F401
except ImportError:  # pragma: no cover - optional at run time
    pass
