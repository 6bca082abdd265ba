"""Authorities: explicit, nearest AUTHORITY.md, default; inheritance and cycles (R-AUTH-1..3)."""

from __future__ import annotations

import pytest
from freshness_helpers import refresh

from orchestrator import (
    ConfigurationError,
    Manager,
    ToolDefinitionError,
    ToolNotFoundError,
)


def names(chain):
    return [a.name for a in chain]


def test_r_auth_1_authority_fields(write, tmp_path):
    write(
        "proj/authorities/strict.md",
        """
        ---
        name: strict
        phases: [$configure, $execute]
        inherit: false
        metadata:
          log: true
        ---
        """,
    )
    write("proj/tools/t.md", "---\nauthority: strict\n---\nx\n")
    authority = Manager([tmp_path / "proj/tools"]).find_authority("t")
    assert authority.name == "strict"
    assert authority.metadata == {"log": True}
    assert authority.phases == ("$configure", "$execute")
    assert authority.inherit == ()


def test_r_auth_2_explicit_authority_from_sibling_folder(write, tmp_path):
    write("proj/authorities/team.md", "---\nmetadata: {owner: team}\n---\n")
    write("proj/tools/AUTHORITY.md", "---\nname: folder\n---\n")
    write("proj/tools/t.md", "---\nauthority: team\n---\nx\n")
    assert Manager([tmp_path / "proj/tools"]).find_authority("t").name == "team"


def test_r_auth_2_nearest_authority_file(write, tmp_path):
    write("proj/tools/AUTHORITY.md", "---\nname: top\n---\n")
    write("proj/tools/team/AUTHORITY.md", "---\nname: team\n---\n")
    write("proj/tools/team/sub/t.md", "x\n")
    write("proj/tools/u.md", "x\n")
    manager = Manager([tmp_path / "proj/tools"])
    assert manager.find_authority("team/sub/t").name == "team"
    assert manager.find_authority("u").name == "top"


def test_r_auth_2_default_when_nothing_else(write, tools):
    write("tools/t.md", "x\n")
    assert Manager([tools]).find_authority("t").name == "default"


def test_r_auth_2_unknown_explicit_authority(write, tools):
    path = write("tools/t.md", "---\ndescription: d\nauthority: nowhere\n---\nx\n")
    with pytest.raises(ConfigurationError) as info:
        Manager([tools]).find_authority("t")
    assert "unknown authority 'nowhere'" in str(info.value)
    assert info.value.path == str(path)
    assert info.value.line == 3
    assert info.value.tool == "t"


def test_r_auth_2_authority_files_are_never_tools(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\n---\n")
    with pytest.raises(ToolNotFoundError):
        Manager([tools]).find_tool("AUTHORITY")


def test_r_auth_3_folder_authorities_inherit_up_the_tree_then_default(write, tmp_path):
    write("proj/tools/AUTHORITY.md", "---\nname: top\n---\n")
    write("proj/tools/a/AUTHORITY.md", "---\nname: a\n---\n")
    write("proj/tools/a/b/AUTHORITY.md", "---\nname: b\n---\n")
    write("proj/tools/a/b/t.md", "x\n")
    assert names(Manager([tmp_path / "proj/tools"]).authority_chain("a/b/t")) == ["default", "top", "a", "b"]


def test_r_auth_3_skips_folders_without_authority(write, tmp_path):
    write("proj/tools/AUTHORITY.md", "---\nname: top\n---\n")
    write("proj/tools/a/b/AUTHORITY.md", "---\nname: b\n---\n")
    write("proj/tools/a/b/t.md", "x\n")
    assert names(Manager([tmp_path / "proj/tools"]).authority_chain("a/b/t")) == ["default", "top", "b"]


def test_r_auth_3_explicit_inherit_and_false(write, tmp_path):
    write("proj/authorities/base.md", "---\ninherit: false\n---\n")
    write("proj/authorities/extra.md", "---\n---\n")
    write("proj/tools/AUTHORITY.md", "---\nname: top\ninherit: [base, extra]\n---\n")
    write("proj/tools/t.md", "x\n")
    write("proj/tools/solo/AUTHORITY.md", "---\nname: solo\ninherit: false\n---\n")
    write("proj/tools/solo/t.md", "x\n")
    manager = Manager([tmp_path / "proj/tools"])
    assert names(manager.authority_chain("t")) == ["base", "default", "extra", "top"]
    assert names(manager.authority_chain("solo/t")) == ["solo"]


def test_r_auth_3_user_default_may_extend_the_builtin_default(write, tmp_path):
    write("proj/authorities/default.md", "---\nname: default\ninherit: default\nmetadata: {house: style}\n---\n")
    write("proj/tools/t.md", "x\n")
    chain = Manager([tmp_path / "proj/tools"]).authority_chain("t")
    assert names(chain) == ["default", "default"]
    assert chain[-1].metadata == {"house": "style"}


def test_r_auth_3_cycle_is_named(write, tmp_path):
    write("proj/authorities/a.md", "---\ninherit: b\n---\n")
    write("proj/authorities/b.md", "---\ninherit: c\n---\n")
    write("proj/authorities/c.md", "---\ninherit: a\n---\n")
    write("proj/tools/t.md", "---\nauthority: a\n---\nx\n")
    with pytest.raises(ConfigurationError) as info:
        Manager([tmp_path / "proj/tools"]).authority_chain("t")
    assert "cycle: a -> b -> c -> a" in str(info.value)


def test_r_auth_3_unknown_inherited_authority(write, tmp_path):
    write("proj/tools/AUTHORITY.md", "---\nname: top\ninherit: ghost\n---\n")
    write("proj/tools/t.md", "x\n")
    with pytest.raises(ConfigurationError) as info:
        Manager([tmp_path / "proj/tools"]).authority_chain("t")
    assert "unknown authority 'ghost'" in str(info.value)
    assert info.value.line == 3


@pytest.mark.parametrize(
    "text",
    ["---\nphases: [configure]\n---\n", "---\ninherit: 3\n---\n", "---\nmetadata: [a]\n---\n", "---\nname: [x]\n---\n"],
)
def test_r_auth_1_malformed_authority(write, tmp_path, text):
    write("proj/tools/AUTHORITY.md", text)
    write("proj/tools/t.md", "x\n")
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tmp_path / "proj/tools"]).find_authority("t")
    assert "AUTHORITY.md" in str(info.value)


def test_r_auth_2_new_authority_file_is_noticed(write, tools):
    write("tools/t.md", "x\n")
    manager = Manager([tools])
    assert manager.invoke_sync("t") == "x"
    assert manager.explain("t").authorities == ("default",)
    write("tools/AUTHORITY.md", "---\nname: late\n---\n")
    refresh(manager)
    assert manager.explain("t").authorities == ("default", "late")


def test_r_auth_1_one_file_as_tool_and_as_authority(write, tmp_path):
    write("proj/authorities/strict.md", "---\nmetadata: {log: true}\n---\n")
    write("proj/tools/t.md", "---\nauthority: strict\n---\nx\n")
    manager = Manager([tmp_path / "proj/tools", tmp_path / "proj/authorities"])
    assert manager.find_tool("strict").kind == "markdown"
    assert manager.find_authority("t").metadata == {"log": True}
    assert manager.find_tool("strict").kind == "markdown"
