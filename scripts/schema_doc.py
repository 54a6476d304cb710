"""Write docs/schema.md from profkit/schema.py's column registry (the column lists users read)."""

from pathlib import Path

from profkit.outputs.atomic import write_text
from profkit.schema import markdown_reference

if __name__ == "__main__":
    print(write_text(Path(__file__).resolve().parents[1] / "docs" / "schema.md", markdown_reference()))
