"""Tests for orchestrator.directives: finding directives (R-DIR-1, R-DIR-2)."""

from __future__ import annotations

import dataclasses

import pytest
from markdown_it import MarkdownIt

from orchestrator import directives
from orchestrator.directives import Directive, directive_plugin, find_directives


def only(source: str) -> Directive:
    """The single directive in `source`."""
    (found,) = find_directives(source)
    return found


def texts(source: str) -> list[str]:
    """The source text of every directive in `source`, in the order returned."""
    return [source[d.start : d.end] for d in find_directives(source)]


# --- the three forms ---------------------------------------------------------


def test_r_dir_1_text_directive_with_label_and_attributes() -> None:
    source = 'Weather: :weather[in Paris]{city=Paris units="metric"} today.'
    found = only(source)
    assert (found.kind, found.name, found.label) == ("text", "weather", "in Paris")
    assert dict(found.attributes) == {"city": "Paris", "units": "metric"}
    assert found.content is None
    assert source[found.start : found.end] == (':weather[in Paris]{city=Paris units="metric"}')


def test_r_dir_1_bare_text_directive_has_no_label_and_no_attributes() -> None:
    found = only("Today is :today.")
    assert (found.kind, found.name, found.label, dict(found.attributes)) == (
        "text",
        "today",
        None,
        {},
    )


def test_r_dir_1_text_directive_with_label_only_or_attributes_only() -> None:
    labelled, attributed = find_directives("a :x[one] b :y{k=v} c")
    assert (labelled.label, dict(labelled.attributes)) == ("one", {})
    assert (attributed.label, dict(attributed.attributes)) == (None, {"k": "v"})


def test_r_dir_1_text_directive_label_keeps_nested_brackets_and_markup() -> None:
    assert only(":x[a [b] **c**]").label == "a [b] **c**"


def test_r_dir_1_escaped_bracket_does_not_end_a_label() -> None:
    assert only(":x[a \\] b]").label == "a \\] b"


def test_r_dir_1_empty_label_is_an_empty_string() -> None:
    assert only(":x[]").label == ""


def test_r_dir_1_text_directive_at_start_of_text_and_after_punctuation() -> None:
    assert texts(":a (:b) *:c* [:d](http://e) :f, :g.") == [
        ":a",
        ":b",
        ":c",
        ":d",
        ":f",
        ":g",
    ]


def test_r_dir_1_leaf_directive_alone_on_its_line() -> None:
    source = "Intro.\n\n::search[cats]{limit=3}\n\nOutro."
    found = only(source)
    assert (found.kind, found.name, found.label) == ("leaf", "search", "cats")
    assert dict(found.attributes) == {"limit": "3"}
    assert found.content is None
    assert source[found.start : found.end] == "::search[cats]{limit=3}"
    assert found.line == 3


def test_r_dir_1_leaf_directive_may_have_trailing_white_space() -> None:
    source = "::toc  \n"
    found = only(source)
    assert found.kind == "leaf"
    assert source[found.start : found.end] == "::toc"


def test_r_dir_1_leaf_directive_interrupts_a_paragraph() -> None:
    source = "Some text\n::leaf\nmore text"
    found = only(source)
    assert (found.kind, found.line) == ("leaf", 2)


@pytest.mark.parametrize("source", ["::a b", "x ::a", "::a{k=v} tail", "::"])
def test_r_dir_1_leaf_line_with_other_text_is_not_a_directive(source: str) -> None:
    assert find_directives(source) == ()


def test_r_dir_1_container_content_is_the_raw_text_between_its_fences() -> None:
    source = "Before\n\n:::note[Heads up]{.warn}\nLine *one*\n\nLine two\n:::\n\nAfter"
    found = only(source)
    assert (found.kind, found.name, found.label) == ("container", "note", "Heads up")
    assert dict(found.attributes) == {"class": "warn"}
    assert found.content == "Line *one*\n\nLine two"
    assert source[found.start : found.end] == (":::note[Heads up]{.warn}\nLine *one*\n\nLine two\n:::")
    assert found.line == 3


def test_r_dir_1_empty_container_has_empty_content() -> None:
    found = only(":::empty\n:::\n")
    assert (found.kind, found.content) == ("container", "")


def test_r_dir_1_container_closing_fence_may_have_more_colons() -> None:
    assert only(":::a\nx\n:::::\n").content == "x"


def test_r_dir_1_code_indented_fence_line_does_not_close_a_container() -> None:
    assert only(":::a\n    :::\nstill\n:::").content == "    :::\nstill"


def test_r_dir_1_container_interrupts_a_paragraph() -> None:
    found = only("Text\n:::box\ninside\n:::\n")
    assert (found.kind, found.content, found.line) == ("container", "inside", 2)


def test_r_dir_1_nested_containers_return_the_outer_with_inner_in_content() -> None:
    source = "::::outer\nA :t\n:::inner{k=v}\nB ::leaf\n:::\nC\n::::\nafter"
    (found,) = find_directives(source)
    assert (found.kind, found.name) == ("container", "outer")
    assert found.content == "A :t\n:::inner{k=v}\nB ::leaf\n:::\nC"
    assert source[found.start : found.end] == source[: source.index("\nafter")]


def test_r_dir_1_closing_fence_with_fewer_colons_does_not_close_the_outer() -> None:
    found = only("::::outer\n:::\nstill inside\n::::")
    assert found.content == ":::\nstill inside"


def test_r_dir_1_directives_inside_a_container_are_not_returned_separately() -> None:
    source = ":::box\n:inner and ::leaf\n\n::leaf2\n:::\n:after"
    assert [d.name for d in find_directives(source)] == ["box", "after"]


def test_r_dir_1_text_directive_in_a_leaf_label_is_part_of_the_label() -> None:
    found = only("::card[see :other]")
    assert (found.kind, found.name, found.label) == ("leaf", "card", "see :other")


def test_r_dir_1_unclosed_container_runs_to_the_end_of_the_document() -> None:
    source = "Intro\n\n:::open{a=1}\nbody :x\n\n::leaf\n\n\n"
    found = only(source)
    assert (found.kind, found.name) == ("container", "open")
    assert found.content == "body :x\n\n::leaf"
    assert source[found.start : found.end] == ":::open{a=1}\nbody :x\n\n::leaf"


def test_r_dir_1_unclosed_container_in_a_list_item_ends_with_the_item() -> None:
    source = "- :::note\n  body\nafter :x\n"
    container, text = find_directives(source)
    assert container.content == "  body"
    assert source[container.start : container.end] == ":::note\n  body"
    assert (text.name, text.line) == ("x", 3)


def test_r_dir_1_unclosed_container_in_a_blockquote_ends_with_the_quote() -> None:
    source = "> :::a\n> b\n\nafter :t"
    container, text = find_directives(source)
    assert source[container.start : container.end] == ":::a\n> b"
    assert container.content == "> b"
    assert text.name == "t"


def test_r_dir_1_container_in_list_and_quote_keeps_line_prefixes_in_content() -> None:
    listed = "- :::note\n  body\n  :::\n- next"
    found = only(listed)
    assert found.content == "  body"
    assert listed[found.start : found.end] == ":::note\n  body\n  :::"
    quoted = "> :::note\n> body\n> :::\n"
    found = only(quoted)
    assert found.content == "> body"
    assert quoted[found.start : found.end] == ":::note\n> body\n> :::"


def test_r_dir_1_opening_fence_without_a_name_is_not_a_container() -> None:
    assert texts(":::\n:t\n:::") == [":t"]


# --- attributes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("{k=v}", {"k": "v"}),
        ('{k="two words"}', {"k": "two words"}),
        ("{k='two words'}", {"k": "two words"}),
        ('{k="it\'s"}', {"k": "it's"}),
        ("{k='say \"hi\"'}", {"k": 'say "hi"'}),
        ('{k="a } b"}', {"k": "a } b"}),
        ('{k=""}', {"k": ""}),
        ("{compact}", {"compact": True}),
        ("{#main}", {"id": "main"}),
        ("{.wide}", {"class": "wide"}),
        ("{.a .b}", {"class": "a b"}),
        ("{.a.b#c}", {"class": "a b", "id": "c"}),
        ('{class="a b" .c}', {"class": "a b c"}),
        ("{k = v}", {"k": "v"}),
        ("{data-x=1 y_z=2 ns:k=3}", {"data-x": "1", "y_z": "2", "ns:k": "3"}),
        ("{url=http://x.y/z?a=b}", {"url": "http://x.y/z?a=b"}),
        ("{k=1 k=2}", {"k": "2"}),
        ("{#a id=b}", {"id": "b"}),
        ("{ a=1  b flag }", {"a": "1", "b": True, "flag": True}),
        ("{}", {}),
    ],
)
def test_r_dir_1_attribute_forms(block: str, expected: dict[str, str | bool]) -> None:
    source = f"x :d{block} y"
    found = only(source)
    assert dict(found.attributes) == expected
    assert source[found.start : found.end] == f":d{block}"


def test_r_dir_1_attribute_values_stay_strings_and_flags_are_true() -> None:
    attributes = only(":d{n=3 on=true flag}").attributes
    assert attributes == {"n": "3", "on": "true", "flag": True}


def test_r_dir_1_attribute_order_is_document_order() -> None:
    attributes = only(":d{z=1 .c a=2 #i}").attributes
    assert list(attributes) == ["z", "class", "a", "id"]


def test_r_dir_1_attributes_spanning_lines_in_a_paragraph() -> None:
    source = 'a :d{one=1\n  two="2"} b'
    found = only(source)
    assert dict(found.attributes) == {"one": "1", "two": "2"}
    assert source[found.start : found.end] == ':d{one=1\n  two="2"}'


@pytest.mark.parametrize("block", ['{k="open}', "{k=}", "{=v}", "{k=a'b}", "{.}", "{#}", "{k", "{a b"])
def test_r_dir_1_malformed_attributes_end_a_text_directive_before_the_brace(
    block: str,
) -> None:
    source = f"x :d{block}"
    found = only(source)
    assert (found.name, dict(found.attributes)) == ("d", {})
    assert source[found.start : found.end] == ":d"


def test_r_dir_1_malformed_attributes_make_a_leaf_line_not_a_directive() -> None:
    assert find_directives('::d{k="open}') == ()
    assert find_directives(":::d{k=}\nx\n:::") == ()


def test_r_dir_1_unclosed_label_ends_a_text_directive_after_its_name() -> None:
    source = ":a[unclosed and :b"
    assert texts(source) == [":a", ":b"]
    assert find_directives(source)[0].label is None


# --- names and look-alikes ---------------------------------------------------


@pytest.mark.parametrize("name", ["a", "web-search", "get_user", "v2", "A-b_c9"])
def test_r_dir_1_names_are_letters_digits_dash_underscore(name: str) -> None:
    assert only(f"x :{name} y").name == name
    assert only(f"::{name}").name == name
    assert only(f":::{name}\n:::").name == name


@pytest.mark.parametrize("source", [":1a", ":-a", ":_a", ":café", "::1a", ":::-a\n:::"])
def test_r_dir_1_invalid_names_are_not_directives(source: str) -> None:
    assert find_directives(source) == ()


@pytest.mark.parametrize(
    "source",
    [
        "Meet at 10:30 today.",
        "Use std::vector here.",
        "std::vector",
        "Note: x",
        "Note:x",
        "See http://x.y/z and https://example.com:8080/path.",
        "mailto:someone",
        "I am foo:smile: today",
        "a:b",
        "ratio 1:2:3",
        "x ::a",
        "\\:escaped",
        "`:code`",
        "`` :a ` ``",
        "```\n:fenced\n::leaf\n:::c\n:::\n```",
        "~~~md\n:fenced\n~~~",
        "    :indented\n    ::leaf",
        "Text\n\n\t:tab-indented",
        "![:alt](image.png)",
        "::",
        ":::",
        ": spaced",
    ],
)
def test_r_dir_1_look_alikes_are_not_directives(source: str) -> None:
    assert find_directives(source) == ()


def test_r_dir_1_directives_next_to_code_are_still_found() -> None:
    source = "`:no` :yes\n\n```\n:no\n```\n:after-fence\n\n    :no\n\n::leaf"
    assert texts(source) == [":yes", ":after-fence", "::leaf"]


def test_r_dir_1_colon_after_a_name_ends_the_directive() -> None:
    assert texts(":smile: and :a:b") == [":smile", ":a"]


def test_r_dir_1_directives_between_xml_like_prompt_tags_are_found() -> None:
    source = "<context>\n:memory\n</context>\n\n<b>:inline</b>"
    assert texts(source) == [":memory", ":inline"]


# --- document order, offsets and lines ---------------------------------------


def test_r_dir_1_document_order_across_forms() -> None:
    source = "# Title :one\n\nText :two and :three\n\n::four\n\n:::five\nbody :hidden\n:::\n\n- item :six\n"
    found = find_directives(source)
    assert [d.name for d in found] == ["one", "two", "three", "four", "five", "six"]
    kinds = ["text", "text", "text", "leaf", "container", "text"]
    assert [d.kind for d in found] == kinds
    assert [d.line for d in found] == [1, 3, 3, 5, 7, 11]
    assert [d.start for d in found] == sorted(d.start for d in found)


def test_r_dir_1_repeated_identical_directives_on_a_line_get_own_offsets() -> None:
    source = ":a x :a y :a"
    assert [d.start for d in find_directives(source)] == [0, 5, 10]
    assert texts(source) == [":a", ":a", ":a"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("first\nsecond :a[x]\nthird :a[x]", [(":a[x]", 2), (":a[x]", 3)]),
        ("para\n   :indented-continuation", [(":indented-continuation", 2)]),
        ("para\n\t:tab-continuation", [(":tab-continuation", 2)]),
        ("- item :a\n  cont :b\n- :c", [(":a", 1), (":b", 2), (":c", 3)]),
        ("1. one :x\n2. two :x", [(":x", 1), (":x", 2)]),
        ("-\t:tabbed", [(":tabbed", 1)]),
        (
            "> quote :q[x]\n> more :q[x] :q[x]",
            [(":q[x]", 1), (":q[x]", 2), (":q[x]", 2)],
        ),
        ("> lazy\n:continuation", [(":continuation", 2)]),
        ("> > deep :d", [(":d", 1)]),
        ("- > :x\n  > y :z", [(":x", 1), (":z", 2)]),
        ("> ::leaf", [("::leaf", 1)]),
        ("- ::leaf{a=1}", [("::leaf{a=1}", 1)]),
        ("# Head :h #\n\n## :h", [(":h", 1), (":h", 3)]),
        ("Setext :s\n===", [(":s", 1)]),
        ("a :x[a\n  b] c", [(":x[a\n  b]", 1)]),
        ("*:e* **:s** [:link](u)", [(":e", 1), (":s", 1), (":link", 1)]),
        ('Say {{ name }} :a{k="{{ v }}"}', [(':a{k="{{ v }}"}', 1)]),
    ],
)
def test_r_dir_1_offsets_and_lines_point_at_the_directive_text(source: str, expected: list[tuple[str, int]]) -> None:
    found = find_directives(source)
    assert [(source[d.start : d.end], d.line) for d in found] == expected


def test_r_dir_1_offsets_in_table_cells() -> None:
    source = "| h :a | :a |\n|------|----|\n| x:a  | :a |\n| a\\|b :c | :a{k=v} |\n| :b | :b |\n"
    found = find_directives(source)
    assert [(source[d.start : d.end], d.line) for d in found] == [
        (":a", 1),
        (":a", 1),
        (":a", 3),
        (":c", 4),
        (":a{k=v}", 4),
        (":b", 5),
        (":b", 5),
    ]
    starts = [d.start for d in found]
    assert starts[:2] == [4, 9]
    assert starts[2] == source.index("| :a |", source.index("x:a")) + 2
    assert starts[-2:] == [source.index("| :b |") + 2, source.rindex(":b")]


def test_r_dir_1_offsets_with_windows_line_endings() -> None:
    source = "a\r\nb :crlf\r\n\r\n::leaf\r\n\r\n:::box\r\nx\r\ny\r\n:::\r\n"
    text, leaf, box = find_directives(source)
    assert (source[text.start : text.end], text.line) == (":crlf", 2)
    assert (source[leaf.start : leaf.end], leaf.line) == ("::leaf", 4)
    assert source[box.start : box.end] == ":::box\r\nx\r\ny\r\n:::"
    assert (box.content, box.line) == ("x\r\ny", 6)


def test_r_dir_1_replacing_directives_from_the_end_keeps_earlier_offsets() -> None:
    source = "Hi :name!\n\n::card[x]\n\n:::box\nbody\n:::\nBye :name."
    result = source
    for found in reversed(find_directives(source)):
        result = result[: found.start] + f"<{found.name}>" + result[found.end :]
    assert result == "Hi <name>!\n\n<card>\n\n<box>\nBye <name>."


def test_r_dir_1_empty_source_has_no_directives() -> None:
    assert find_directives("") == ()


# --- jinja2 template text (R-DIR-2) ------------------------------------------


def test_r_dir_2_jinja_text_around_directives_is_left_alone() -> None:
    source = "Hello {{ args.name }}, {% if x %}:greet{% endif %}\n{# a comment #} word{{ a }} :b{{ c }}"
    assert texts(source) == [":greet", ":b"]
    assert all(not d.attributes for d in find_directives(source))


def test_r_dir_2_double_brace_after_a_name_is_not_an_attribute_block() -> None:
    source = "x :weather{{ args.city }} y"
    found = only(source)
    assert (found.name, dict(found.attributes)) == ("weather", {})
    assert source[found.start : found.end] == ":weather"


def test_r_dir_2_jinja_in_quoted_attribute_values_is_kept_verbatim() -> None:
    source = ":weather[{{ label }}]{city=\"{{ args.city | default('Paris') }}\" when='{% if late %}night{% endif %}'}"
    found = only(source)
    assert found.label == "{{ label }}"
    assert dict(found.attributes) == {
        "city": "{{ args.city | default('Paris') }}",
        "when": "{% if late %}night{% endif %}",
    }
    assert source[found.start : found.end] == source


def test_r_dir_2_jinja_in_unquoted_values_makes_the_block_malformed() -> None:
    found = only("x :w{city={{ args.city }}}")
    assert (found.name, dict(found.attributes)) == ("w", {})


def test_r_dir_2_text_inside_jinja_tags_is_never_a_directive() -> None:
    source = "{{ d[':key'] }} {% set s = ' :x' %} {# :y #} :z"
    assert texts(source) == [":z"]


def test_r_dir_2_hash_shortcut_is_an_id_not_a_jinja_comment() -> None:
    assert dict(only(":a{#main}").attributes) == {"id": "main"}


def test_r_dir_2_jinja_in_container_content_is_kept_verbatim() -> None:
    found = only(":::box\n{% for i in items %}{{ i }}{% endfor %}\n:::")
    assert found.content == "{% for i in items %}{{ i }}{% endfor %}"


# --- results: caching and immutability ---------------------------------------


def test_r_dir_1_same_source_twice_returns_the_identical_tuple() -> None:
    source = "cache me :please[now]"
    assert find_directives(source) is find_directives(source)


def test_r_dir_1_equal_sources_built_separately_hit_the_cache() -> None:
    first = find_directives("".join(["a :b", " c"]))
    assert find_directives("a :b c") is first


def test_r_dir_1_attributes_are_read_only() -> None:
    found = only(":a{k=v}")
    with pytest.raises(TypeError):
        found.attributes["k"] = "changed"  # type: ignore[index]
    assert dict(found.attributes) == {"k": "v"}
    assert dict(find_directives(":a{k=v}")[0].attributes) == {"k": "v"}


def test_r_dir_1_directives_are_frozen_and_hashable() -> None:
    found = only(":a{k=v}")
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.name = "b"  # type: ignore[misc]
    copy = dataclasses.replace(found)
    assert copy == found and hash(copy) == hash(found)


# --- the markdown-it plugin --------------------------------------------------


def test_r_dir_1_plugin_adds_directive_tokens_to_any_markdown_it() -> None:
    md = MarkdownIt("commonmark").use(directive_plugin)
    tokens = md.parse(":::box{k=v}\ninner\n:::\n\n::leaf\n\ntext :t[x]")
    types = [token.type for token in tokens]
    assert "directive_container" in types and "directive_leaf" in types
    inline = [token for token in tokens if token.type == "inline"][-1]
    (text,) = [c for c in inline.children or () if c.type == "directive_text"]
    assert (text.meta["head"].name, text.meta["head"].label) == ("t", "x")


def test_r_dir_1_plugin_renders_directives_as_their_escaped_source() -> None:
    md = MarkdownIt("commonmark").use(directive_plugin)
    assert md.render("a :b[<c>] d") == "<p>a :b[&lt;c&gt;] d</p>\n"
    assert md.render("::leaf{k=v}") == "::leaf{k=v}\n"


def test_module_exports_exactly_the_documented_api() -> None:
    expected = ["Directive", "directive_plugin", "find_directives"]
    assert sorted(directives.__all__) == expected
