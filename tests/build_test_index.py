"""Build the tests' index of the shared sample before pytest runs (``.ci/run``):

    python3 -m tests.build_test_index

The same cache, key and lock as the ``sample_index_dir`` fixture (:func:`tests.conftest.
ensure_sample_index`); does nothing when the index is there. Built here, the 2-3 minutes (2-10
on a busy machine) do not count against the first slow test's time limit (pytest-timeout,
``[tool.pytest.ini_options] timeout``).
"""

from __future__ import annotations

from rag.encoders import load_encoder
from rag.settings import RagSettings
from tests.conftest import SHARED_DATA, ensure_sample_index, read_passages


def main() -> None:
    encoder = load_encoder(RagSettings().encoder)
    index_dir = ensure_sample_index(read_passages(SHARED_DATA / "corpus.jsonl"), encoder,
                                    lambda line: print(line, flush=True))
    print(f"test index: {index_dir}")


if __name__ == "__main__":
    main()
