# The pkgs that nix/agent-modules/mcp.nix touches, as an inert stand-in: its only use of pkgs is the default
# package (pkgs.callPackage ../package.nix { }), and evaluating the module must not need nixpkgs.
{
  callPackage = _fn: _args: {
    type = "derivation";
    name = "hive-daemons-0.1.0";
    outPath = "/nix/store/00000000000000000000000000000000-hive-daemons-0.1.0";
  };
}
