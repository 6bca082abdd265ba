"""A small prompt library: partials, a Picoschema shorthand, a local level and an instruction file applied by glob."""

import json
import shutil
import tempfile
from pathlib import Path

from orchestrator import Manager
from orchestrator.errors import ArgsValidationError
from orchestrator.instructions import explain_instructions

HERE = Path(__file__).resolve().parent


def run(project: Path) -> None:
    manager = Manager(paths=[project / "tools"], cwd=project)

    print("== checklist: the shared persona and bullets partials, rendered")
    print(manager.invoke_sync("checklist", {"files": ["src/app.py", "docs/guide.md"], "focus": "bugs"}))

    print("\n== checklist's params, written as shorthand, mean this JSON Schema")
    explanation = manager.explain("checklist")
    print(json.dumps(explanation.schemas["params"]))
    try:
        manager.invoke_sync("checklist", {"files": ["src/app.py"], "focus": "speed"})
    except ArgsValidationError as exc:
        print("a bad focus is refused:", exc)

    print("\n== tone: the local level overrides the folder's")
    tone = explanation.key("tone")
    print(f"tone = {tone.value!r}, set by {' then '.join(tone.levels)}")
    print("levels:", " -> ".join(name for name, _kind in explanation.levels))

    # review.script.yaml expects the Python instruction in the prompt. A call naming no Python file sends none,
    # so it is answered from review-docs.script.yaml instead (as `--set model=...` would choose it).
    docs_script = {"model": {"provider": "scripted", "file": "review-docs.script.yaml"}}
    review = manager.find_tool("review").metadata
    for files, overrides in ((["src/app.py"], None), (["docs/guide.md"], docs_script)):
        args = {"files": files}
        print(f"\n== review {files[0]}")
        for verdict in explain_instructions(review, args, project):
            print(verdict)
        print("answer:", manager.invoke_sync("review", args, overrides=overrides))


def main() -> None:
    # Instruction files are read from the project root: the nearest folder holding .git. Git cannot track a .git
    # inside this repository, so we copy this folder into a temporary one and make it a project of its own, as if
    # cloned. (Run in place, the root would be the toolcascade checkout, which has no such rule.)
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        shutil.copytree(HERE, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        (project / ".git").mkdir()
        run(project)


if __name__ == "__main__":
    main()
