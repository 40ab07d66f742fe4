# Evaluates nix/agent-modules/mcp.nix with lib.evalModules and returns, as JSON-able data, what the tests check.
#   libPath:      null for the stand-in lib (./lib.nix), or a path to nixpkgs' lib/ for the real one
#   extraModules: further modules, e.g. an agent.nix overriding an entry
{ libPath ? null, extraModules ? [ ] }:

let
  lib = if libPath == null then import ./lib.nix else import libPath;
  result = lib.evalModules {
    modules = [ ./harness-options.nix ../../nix/agent-modules/mcp.nix ] ++ extraModules;
    specialArgs.pkgs = import ./stub-pkgs.nix;
  };
  inherit (result) config options;
  moduleFile = toString ../../nix/agent-modules/mcp.nix;
  describe = opt: {
    inherit (opt) description;
    type = opt.type.description;
    default = opt.default or null;
  };
in
{
  servers = config.hyperhive.extraMcpServers;
  services = config.systemd.services;
  tmpfiles = config.systemd.tmpfiles.rules;
  operatorVariables = config.environment.variables;
  operatorPackages = builtins.length config.environment.systemPackages;
  failedAssertions = map (a: a.message) (builtins.filter (a: !a.assertion) config.assertions);
  # The module's own definitions of the server list, as the module system sees them before merging:
  # each entry still wrapped in its mkDefault (priority 1000).
  serverDefinitions = map (d: d.value)
    (builtins.filter (d: toString d.file == moduleFile) options.hyperhive.extraMcpServers.definitionsWithLocations);
  options = builtins.mapAttrs (_: describe) (removeAttrs options.hyperhive.mcp [ "package" ]);
}
