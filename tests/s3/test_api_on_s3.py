"""The store and recall API tests, run again unchanged with the tables in a bucket.

Each class is imported from its local-directory module, so pytest collects it here too, where
tests/s3/conftest.py's `open_client` (and so `client`) puts the tables in a fresh bucket of
the moto S3 server. A representative subset: incremental store, edits, background stores and
racing clients; recall in Chinese, English and mixed text with the full-text and vector
indexes; export and import; reads and deletes.
"""

from tests.memories.test_read_delete import TestDelete  # noqa: F401
from tests.recall.test_recall_api import TestIndexes, TestKeywordQuestions  # noqa: F401
from tests.store.test_store_api import (  # noqa: F401
    TestBackgroundStore,
    TestConcurrency,
    TestMessageLevel,
    TestSeedScenarios,
)
from tests.transfer.test_export_import import TestMoveToAnotherMachine  # noqa: F401
