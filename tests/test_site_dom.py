"""A small HTML tree for the site tests (the standard library's parser; no extra dependency).

``parse_html(text)`` gives a :class:`Node` with ``find``/``find_all``/``by_id``/``text``; the
other site tests import it from here. The tests at the bottom check the helper itself.
"""

from __future__ import annotations

from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None):
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Node | str] = []

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Descendants with ``tag`` (any when None) whose attributes include ``attrs``
        (``class_`` matches one class among several)."""
        found = []
        for node in self.iter():
            if node is self or (tag and node.tag != tag):
                continue
            ok = True
            for name, value in attrs.items():
                if name == "class_":
                    ok = value in (node.attrs.get("class") or "").split()
                else:
                    ok = node.attrs.get(name) == value
                if not ok:
                    break
            if ok:
                found.append(node)
        return found

    def find(self, tag: str | None = None, **attrs: str) -> Node | None:
        found = self.find_all(tag, **attrs)
        return found[0] if found else None

    def by_id(self, element_id: str) -> Node | None:
        return self.find(id=element_id)

    def text(self) -> str:
        parts = []
        for child in self.children:
            parts.append(child if isinstance(child, str) else child.text())
        return "".join(parts)

    def __repr__(self) -> str:
        return f"<{self.tag} {self.attrs}>"


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def parse_html(text: str) -> Node:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    return builder.root


def test_parse_html_builds_a_tree():
    doc = parse_html('<p id="a" class="x y">one <b>two</b></p><br><p>three</p>')
    assert doc.by_id("a").text() == "one two"
    assert [p.text() for p in doc.find_all("p")] == ["one two", "three"]
    assert doc.find("p", class_="y") is doc.by_id("a")


def test_parse_html_decodes_entities():
    assert parse_html("<code>&lt;script&gt;</code>").find("code").text() == "<script>"
