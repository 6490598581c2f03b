"""Write docs/settings.md from the settings' declarations (``skillstream.settings``).

Run from the repository root after changing a setting: ``python scripts/settings_doc.py``
(``make docs``). ``tests/foundation/test_settings_doc.py`` fails while the committed file differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skillstream.settings import settings_markdown  # noqa: E402

TARGET = ROOT / "docs" / "settings.md"


def main(target: Path = TARGET) -> None:
    target.write_text(settings_markdown(), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
