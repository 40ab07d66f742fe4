# hive-daemons as a Python application: hive-bash-daemon, hive-subagent-daemon, their operator CLIs
# (hive-bash, hive-subagent) and hive-loose-ends, all console scripts declared in setup.cfg.
# setup.cfg is the one place for metadata, dependencies and entry points: the version is read from it, and
# `dependencies` below are the nixpkgs Python-set names of its install_requires (tests/nix checks the two
# lists agree). nixpkgs must carry versions that satisfy setup.cfg's bounds (mcp ~= 2.3.0 in particular):
# the build's runtime-dependency check refuses anything else.
{ lib, python3Packages, bash }:

let
  setupCfg = builtins.readFile ../setup.cfg;
  versionMatch = builtins.match ".*\nversion = ([^\n]+)\n.*" setupCfg;
in
python3Packages.buildPythonApplication {
  pname = "hive-daemons";
  version =
    if versionMatch == null then throw "nix/package.nix: no `version = ...` line in setup.cfg"
    else builtins.head versionMatch;
  pyproject = true;

  # Only what the wheel is built from: never the venv, the npm cache, harness state or the tests.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../setup.cfg
      ../pyproject.toml
      ../README.md # setup.cfg's long_description
      ../common
      ../hivebash
      ../hivesubagent
    ];
  };

  build-system = with python3Packages; [ setuptools wheel ];

  dependencies = with python3Packages; [
    mcp
    werkzeug
    waitress
    click
    jsonschema
    psutil
  ];

  # Tasks run as `bash -c CMD`, and NixOS has no /bin/bash. Suffix, not prefix: the PATH the service gives
  # (the agent's profiles) still decides which bash and which tools a task finds first.
  makeWrapperArgs = [ "--suffix" "PATH" ":" (lib.makeBinPath [ bash ]) ];

  # The suite drives real external clients (the claude CLI, node, the MCP conformance suite) that the build
  # sandbox has neither installed nor a network to fetch; scripts/test runs it on a developer machine and CI.
  doCheck = false;
  pythonImportsCheck = [ "common" "hivebash" "hivesubagent" ];

  meta = {
    description = "Background shell execution and nested claude sub-agents for Claude Code, as MCP tools over streamable HTTP";
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
    mainProgram = "hive-bash-daemon";
  };
}
