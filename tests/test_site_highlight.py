"""Build-time syntax colouring (errordb/publish/highlight.py)."""

from __future__ import annotations

from test_site_dom import parse_html

from errordb.publish.highlight import _highlighted, code_block


def test_every_source_line_keeps_its_text_and_its_real_number():
    source = '\n    x = """a\nb"""  # <c>\n    raise ValueError(\n        "m"\n    )'
    doc = parse_html(str(code_block(source, first_line=2888, highlight=2891, anchors=True)))
    lines = doc.find_all(None, class_="line")
    assert [line.text() for line in lines] == source.split("\n")  # a leading blank line is kept
    assert [line.attrs["data-n"] for line in lines] == [str(n) for n in range(2888, 2894)]
    assert [line.attrs["id"] for line in lines][0] == "L2888"
    marked = [line for line in lines if line.tag == "mark"]
    assert len(marked) == 1 and marked[0].attrs["data-n"] == "2891"
    # A docstring spanning lines is cut at the newline, so the spans nest in each line.
    assert lines[1].find("span", class_="s2").text() == '"""a'
    assert lines[2].find("span", class_="s2").text() == 'b"""'
    assert lines[2].find("span", class_="c1").text() == "# <c>"


def test_text_is_escaped_and_unnumbered_blocks_have_no_numbers():
    html = str(code_block("</pre><script>x()</script>", language="text"))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "data-n" not in html and "numbered" not in html


def test_shell_and_unknown_languages():
    assert _highlighted("python -m sglang.launch_server --pp 2", "shell")
    assert list(_highlighted("a\nb", "cobol")) == ["a", "b"]
    assert _highlighted("", "python") == ()


def test_python_lexed_line_by_line_is_coloured_as_pygments_colours_the_whole_window():
    """Lines are lexed one at a time (and remembered) up to the first that could start a
    construct spanning lines: over every 37-line window of this project's own source, the
    colours are those of Pygments lexing the window whole."""
    from pathlib import Path

    from errordb.publish.highlight import _lexed

    root = Path(__file__).resolve().parents[1]
    checked = 0
    for path in sorted([*root.glob("errordb/**/*.py"), *root.glob("tests/*.py"), *root.glob("bench/*.py")]):
        lines = path.read_text(encoding="utf-8").split("\n")
        for start in range(0, max(1, len(lines) - 36), 7):
            window = "\n".join(lines[start : start + 37])
            whole = _lexed(window, "python")
            if window.endswith("\n") and len(whole) > 1:
                whole.pop()  # as a snippet's last newline makes no line of its own
            assert list(_highlighted(window, "python")) == whole, (path, start)
            checked += 1
    assert checked > 1000
