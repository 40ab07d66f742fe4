# hive-daemons as a Python application: hive-bash-daemon, hive-subagent-daemon, their operator CLIs
# (hive-bash, hive-subagent) and hive-todos, all console scripts declared in setup.cfg.
#
# Dependencies. `requires` below is setup.cfg's install_requires as nixpkgs names (tests/nix checks the two
# agree). nixpkgs releases carry an mcp older than ours (1.27.1 where we need ~= 2.3.0) and no mcp-types or
# httpx2 at all, and the build's runtime-dependency check refuses such a set. So this file CARRIES the few
# pure-Python wheels mcp 2.3.0 needs beyond nixpkgs (./python-pins.json: mcp, mcp-types, httpx2, httpcore2,
# idna: the exact versions the test venv runs, PyPI's wheels by name and sha256), and takes each one only
# when the nixpkgs at hand does not satisfy the rule that asks for it: on a nixpkgs that has mcp 2.3.x,
# nothing is carried and nixpkgs' own mcp is used.
#
# Why carry rather than narrow the dependencies to what the daemons import: they import mcp.shared.inbound
# and mcp_types, and importing any mcp module runs mcp/__init__.py, which loads its client and server (httpx2,
# anyio, starlette, uvicorn, opentelemetry, pyjwt...). Narrowing would mean copying SDK code into the project
# and keeping it in step by hand; five wheels with their hashes, checked against PyPI and the venv by
# tests/nix/test_python_pins.py, are less to maintain, and disappear by themselves once nixpkgs catches up.
#
# The carried wheels go in through packageOverrides, so every package of the closure sees the same one
# (a carried idna next to nixpkgs' idna would fail the build's conflict check). Any other dependency too old
# in nixpkgs (pydantic < 2.12, say) stops the evaluation with a message naming it and the rule.
{ lib, python3, bash }:

let
  inherit (builtins) all attrNames compareVersions concatMap elemAt filter fromJSON genList length listToAttrs
    map match readFile split splitVersion toString;

  setupCfg = readFile ../setup.cfg;
  versionMatch = match ".*\nversion = ([^\n]+)\n.*" setupCfg;

  requires = {
    mcp = "~=2.3.0";
    werkzeug = ">=3.0,<4";
    waitress = ">=3.0,<4";
    click = ">=8.1,<9";
    jsonschema = ">=4.20,<5";
    psutil = ">=5.9,<8";
  };

  pins = fromJSON (readFile ./python-pins.json);
  nixpkgsSet = python3.pkgs;

  # --- PEP 440 rules as setup.cfg and wheel metadata write them: `>=a,<b`, `==v`, `~=v` -------------------
  # ~=2.3.0 allows 2.3.* (the ceiling is 2.4); ~=8.1 allows 8.* (the ceiling is 9).
  compatibleCeiling = v:
    let
      parts = splitVersion v;
      kept = genList (elemAt parts) (length parts - 1);
      last = length kept - 1;
    in
    builtins.concatStringsSep "." (genList (i: if i == last then toString (fromJSON (elemAt kept i) + 1) else elemAt kept i) (length kept));

  clauseHolds = version: clause:
    let
      m = match " *(~=|==|!=|>=|<=|<|>) *([0-9][0-9A-Za-z.]*) *" clause;
      op = elemAt m 0;
      cmp = compareVersions version (elemAt m 1);
    in
    if m == null then throw "nix/package.nix: cannot read the version rule `${clause}'"
    else if op == ">=" then cmp >= 0
    else if op == ">" then cmp > 0
    else if op == "<=" then cmp <= 0
    else if op == "<" then cmp < 0
    else if op == "==" then cmp == 0
    else if op == "!=" then cmp != 0
    else cmp >= 0 && compareVersions version (compatibleCeiling (elemAt m 1)) < 0;

  satisfies = version: rule: all (clauseHolds version) (filter builtins.isString (split "," rule));

  # --- which pins this nixpkgs needs ------------------------------------------------------------------
  # The rules asking for `name`: setup.cfg's, and those of every pin that is itself carried.
  rulesFor = name:
    (if requires ? ${name} then [ requires.${name} ] else [ ])
    ++ map (p: pins.${p}.requires.${name}) (filter (p: pins.${p}.requires ? ${name} && carried.${p}) (attrNames pins));

  nixpkgsMeets = name: rules: nixpkgsSet ? ${name} && all (satisfies nixpkgsSet.${name}.version) rules;

  carried = builtins.mapAttrs (name: _: let rules = rulesFor name; in rules != [ ] && !(nixpkgsMeets name rules)) pins;
  carriedNames = filter (n: carried.${n}) (attrNames pins);

  # The version each asked-for package will have, or an evaluation error that says what is missing.
  versionOf = name: if carried.${name} or false then pins.${name}.version else nixpkgsSet.${name}.version or null;
  checkRule = asker: name: rule:
    let have = versionOf name; in
    if have != null && satisfies have rule then true
    else throw ("nix/package.nix: ${asker} needs ${name} ${rule}, and this nixpkgs has "
      + (if have == null then "no ${name}" else "${name} ${have}")
      + " (nix/python-pins.json carries none that fits): use a newer nixpkgs, or pin ${name} there.");
  checkAll = asker: rules: all (name: checkRule asker name rules.${name}) (attrNames rules);
  allRulesHold =
    checkAll "setup.cfg" requires
    && all (p: checkAll "${p} ${pins.${p}.version}" pins.${p}.requires) carriedNames;

  # --- the Python set with the carried wheels in it ---------------------------------------------------
  carriedWheel = self: name: pin: self.buildPythonPackage {
    pname = name;
    inherit (pin) version;
    format = "wheel";
    # The wheel as PyPI publishes it; fetchPypi spells out the file's address from its name.
    src = self.fetchPypi {
      pname = builtins.head (match "([^-]+)-.*" pin.file); # mcp_types, as the file is named
      inherit (pin) version sha256;
      format = "wheel";
      dist = "py3";
      python = "py3";
    };
    dependencies = map (d: self.${d}) (attrNames pin.requires)
      ++ concatMap (d: concatMap (extra: self.${d}.optional-dependencies.${extra}) pin.extras.${d}) (attrNames pin.extras);
    pythonImportsCheck = [ pin.module ];
  };

  # Nothing carried: nixpkgs' own python3, untouched.
  python = if carriedNames == [ ] then python3 else python3.override {
    self = python;
    packageOverrides = self: _super: listToAttrs (map (n: { name = n; value = carriedWheel self n pins.${n}; }) carriedNames);
  };
  pythonPackages = python.pkgs;
in
assert allRulesHold;
pythonPackages.buildPythonApplication {
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

  build-system = with pythonPackages; [ setuptools wheel ];

  dependencies = map (name: pythonPackages.${name}) (attrNames requires);

  # Tasks run as `bash -c CMD`, and NixOS has no /bin/bash. Suffix, not prefix: the PATH the service gives
  # (the agent's profiles) still decides which bash and which tools a task finds first.
  makeWrapperArgs = [ "--suffix" "PATH" ":" (lib.makeBinPath [ bash ]) ];

  # The suite drives real external clients (the claude CLI, node, the MCP conformance suite) that the build
  # sandbox has neither installed nor a network to fetch; scripts/test runs it on a developer machine and CI.
  doCheck = false;
  pythonImportsCheck = [ "common" "hivebash" "hivesubagent" ];

  passthru = {
    # Which of nix/python-pins.json this nixpkgs needed (none once it carries mcp 2.3.x itself).
    carriedFromPypi = carriedNames;
    pythonRequires = requires;
  };

  meta = {
    description = "Background shell execution and nested claude sub-agents for Claude Code, as MCP tools over streamable HTTP";
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
    mainProgram = "hive-bash-daemon";
  };
}
