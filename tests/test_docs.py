"""Docs generated from code stay in step with it."""

import importlib.util

from conftest import ROOT


def test_schema_doc_is_current():
    spec = importlib.util.spec_from_file_location("schema_doc", ROOT / "scripts" / "schema_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "schema.md").read_text() == module.render(), "run: python scripts/schema_doc.py"
