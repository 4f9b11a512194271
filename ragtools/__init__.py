"""Build tools (``python -m ragtools ...``): fetch the corpus from the hub, build the index, expand
the offline sentence-transformers model, export it to ONNX. The run time (``rag``, ``bot``) never
starts them on its own: a missing model folder is an error naming the command here; only the
bot's start-up builds a missing index, and only when ``BOT_BUILD_INDEX=1`` says so."""
