"""The documentation, the sample configuration file and tox.ini stay true to the code."""
from __future__ import annotations

import ast
import configparser
import difflib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from oslo_config import cfg

from notify_transport.options import list_opts

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "doc" / "source"
SAMPLE = ROOT / "etc" / "notify-transport.conf.sample"
GENERATOR_CONF = ROOT / "etc" / "notify-transport-config-generator.conf"
REGENERATE = ("oslo-config-generator --config-file etc/notify-transport-config-generator.conf "
              "(or tox -e genconfig), from the repository root")


def options_by_group() -> dict[str, dict[str, cfg.Opt]]:
    return {group or "DEFAULT": {opt.name: opt for opt in opts} for group, opts in list_opts()}


def rst_files() -> list[Path]:
    return sorted(DOC.glob("*.rst"))


def without_comments(text: str) -> str:
    """The rst text minus comment blocks (``..`` alone, then indented lines)."""
    out, in_comment = [], False
    for line in text.splitlines():
        if line.strip() == "..":
            in_comment = True
            continue
        if in_comment and (not line.strip() or line.startswith((" ", "\t"))):
            continue
        in_comment = False
        out.append(line)
    return "\n".join(out)


def code_blocks(text: str, language: str) -> list[str]:
    """Bodies of ``.. code-block:: LANGUAGE`` directives, dedented."""
    blocks, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != f".. code-block:: {language}":
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        blocks.append("\n".join(body))
    return [textwrap.dedent(b).strip() for b in blocks]


# -- sample configuration --------------------------------------------------------

def test_sample_config_matches_the_options(tmp_path: Path) -> None:
    from oslo_config import generator

    out = tmp_path / "sample.conf"
    generator.main(["--config-file", str(GENERATOR_CONF), "--output-file", str(out)])
    fresh, committed = out.read_text(), SAMPLE.read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True),
                                        "committed", "generated", n=1))
    assert fresh == committed, (f"{SAMPLE.relative_to(ROOT)} is stale; regenerate it with "
                                f"{REGENERATE}:\n{diff[:4000]}")


def test_sample_config_has_every_group() -> None:
    text = SAMPLE.read_text()
    for group in options_by_group():
        assert f"[{group}]" in text, f"[{group}] missing; regenerate with {REGENERATE}"


def test_generator_config_names_the_namespace() -> None:
    parser = configparser.ConfigParser()
    parser.read(GENERATOR_CONF)
    assert parser.get("DEFAULT", "namespace") == "notify_transport"
    assert parser.get("DEFAULT", "output_file") == "etc/notify-transport.conf.sample"


# -- the documentation -----------------------------------------------------------------

def test_sphinx_build_with_warnings_as_errors(tmp_path: Path) -> None:
    """Nitpicky (-n) as tox -e docs and make docs: every cross-reference resolves."""
    pytest.importorskip("sphinx", reason="install the docs extra")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q", "-b", "html",
                           str(DOC), str(tmp_path / "html")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    options_page = (tmp_path / "html" / "configuration.html").read_text()
    for group, opts in options_by_group().items():
        assert group in options_page
        for name in opts:
            assert name in options_page, f"[{group}] {name} missing from the generated reference"


def test_ini_examples_use_real_options_and_values() -> None:
    from notify_transport.listeners import SECTION_PREFIX, listener_opts

    groups = options_by_group()
    # serve's config file also holds oslo.log's options (its public oslo.config.opts entry point)
    from stevedore import driver

    for group, opts in driver.DriverManager("oslo.config.opts", "oslo.log").driver():
        groups.setdefault(group or "DEFAULT", {}).update({opt.dest: opt for opt in opts})
    checked = 0
    for path in rst_files():
        for block in code_blocks(path.read_text(), "ini"):
            if block.startswith("[["):  # a devstack local.conf
                continue
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            parser.optionxform = str  # type: ignore[assignment,method-assign]
            parser.read_string(block)
            sections = [("DEFAULT", parser.defaults())] + [(s, {
                k: v for k, v in parser.items(s, raw=True) if k not in parser.defaults()})
                for s in parser.sections()]
            for section, items in sections:
                for key, value in items.items():
                    opts = groups.get(section)
                    if section.startswith(SECTION_PREFIX):  # [listener:NAME]: one entry-point listener
                        opts = {opt.name: opt for opt in listener_opts()}
                    assert opts is not None, f"{path.name}: unknown section [{section}]"
                    assert key in opts, f"{path.name}: [{section}] {key} is not an option"
                    opt = opts[key]
                    opt.type(value)  # raises on a value the option rejects
                    checked += 1
    assert checked >= 20


def _corpus() -> str:
    parts = [p.read_text() for p in (ROOT / "notify_transport").rglob("*.py")]
    parts += [p.read_text() for p in (ROOT / "devstack").rglob("*") if p.is_file()]
    parts += [p.read_text() for p in (ROOT / "tests").rglob("*.py") if p.name != "test_docs.py"]
    parts += [p.read_text() for p in (ROOT / "bench").rglob("*.py")]  # the benchmarks the docs cite
    for name in ("setup.cfg", "Makefile", "tox.ini"):
        if (ROOT / name).exists():
            parts.append((ROOT / name).read_text())
    return "\n".join(parts)


#: Names the docs quote that belong to other projects, not to this code base.
FOREIGN_NAMES = {"oslo_messaging", "min.insync.replicas", "redacted_copy"}


def test_names_quoted_in_the_docs_exist_in_the_code() -> None:
    corpus = _corpus()
    missing = []
    for path in rst_files():
        text = without_comments(path.read_text())
        for literal in re.findall(r"``([^`]+)``", text):
            if "/" in literal and (ROOT / literal).exists():
                continue  # a path in this repository
            for name in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b",
                                   literal):
                if name not in FOREIGN_NAMES and not re.search(rf"\b{re.escape(name)}\b", corpus):
                    missing.append(f"{path.name}: {name} (in ``{literal}``)")
    assert not missing, "quoted in the docs but found nowhere in the code:\n" + "\n".join(missing)


def test_devstack_variables_in_the_docs_are_settings() -> None:
    settings = (ROOT / "devstack" / "settings").read_text()
    plugin = "\n".join(p.read_text() for p in [ROOT / "devstack" / "plugin.sh",
                                                *(ROOT / "devstack" / "lib").iterdir()])
    devstack_own = {"RABBIT_HOST", "RABBIT_USERID", "RABBIT_PASSWORD", "SERVICE_HOST", "DEST",
                    "DATA_DIR"}
    documented = set()
    for text in ((DOC / "deployment.rst").read_text(), (ROOT / "devstack" / "README.md").read_text()):
        documented |= set(re.findall(r"\b(?:RPC|NOTIFY|KAFKA|SCALA|NT_SERVE)_[A-Z0-9_]+\b", text))
    for name in sorted(documented - devstack_own):
        assert re.search(rf"^{name}=\$\{{{name}:-", settings, re.MULTILINE), \
            f"{name} is documented but not a setting"
    for name in sorted(set(re.findall(r"^([A-Z][A-Z0-9_]+)=\$\{", settings, re.MULTILINE))):
        if name.startswith(("RPC_", "NOTIFY_", "KAFKA_", "SCALA_", "NT_SERVE_")):
            assert name in documented, f"setting {name} is not documented"
            # SCALA_BASEURL is accepted for devstack-plugin-kafka configs, documented as unused
            assert name in plugin or name == "SCALA_BASEURL", f"setting {name} is unused"


def test_every_page_is_in_the_toctree() -> None:
    index = (DOC / "index.rst").read_text()
    for path in rst_files():
        if path.stem != "index":
            assert re.search(rf"^\s+{path.stem}$", index, re.MULTILINE), f"{path.name} not in index"


# -- tox.ini ------------------------------------------------------------------------------

def test_tox_envs() -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    for env in ("functional", "spark", "docs", "genconfig", "bench", "pep8", "mypy"):
        assert parser.has_section(f"testenv:{env}"), env
    assert "tests/unit" in parser.get("testenv", "commands")  # py3 runs the base testenv
    docs = parser.get("testenv:docs", "commands")
    assert "sphinx-build -n -W" in docs and "doc/source" in docs
    assert "etc/notify-transport-config-generator.conf" in parser.get("testenv:genconfig", "commands")
    assert "tests/functional" in parser.get("testenv:functional", "commands")
    assert "tests/spark" in parser.get("testenv:spark", "commands")


def test_notify_kafka_options_table_lists_what_the_source_reads() -> None:
    """The pipeline page's table of ``notify_kafka`` options: each one the source reads, no other."""
    page = (DOC / "pipeline.rst").read_text()
    section = page.split("The ``notify_kafka`` data source\n", 1)[1].split("\nSpeed\n", 1)[0]
    rows = re.findall(r"^   \* - (.+)$", section, re.MULTILINE)[1:]  # the header row names the columns
    documented = {name.lower() for row in rows for name in re.findall(r"``([A-Za-z_.<>]+)``", row)}
    documented -= {"kafka.bootstrap.servers", "kafka.<property>"}  # the ``kafka.`` prefix, read apart
    source = (ROOT / "notify_transport" / "pipeline" / "source.py").read_text()
    taken = next(ast.literal_eval(node.value.args[0]) for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "OPTIONS")
    read = set(re.findall(r"""opts(?:\.get\(|\[)"([a-z_.]+)\"""", source))
    assert documented == taken, (f"documented only: {sorted(documented - taken)}; "
                                 f"taken only: {sorted(taken - documented)}")
    assert read == taken, f"read but refused: {sorted(read - taken)}; taken but unread: {sorted(taken - read)}"
