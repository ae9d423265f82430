"""MkDocs hook: a method page's declarations come from the method's own declaration.

``<!-- method: NAME -->`` in a page becomes ``fedcausal-flwr methods --markdown``'s text for
NAME (what the method is, what its sites send, its options), so the site never restates an
option, default or disclosure by hand.
"""

from __future__ import annotations

import re
from typing import Any

MARK = re.compile(r"<!-- method: ([a-z0-9-]+) -->")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if not MARK.search(markdown):
        return markdown
    from fedcausal_flwr.method_reference import method_markdown

    links = "../" * page.file.src_uri.count("/")
    return MARK.sub(lambda m: method_markdown(m.group(1), level=3, links=links), markdown)
