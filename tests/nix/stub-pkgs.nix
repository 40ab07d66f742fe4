# The pkgs that nix/agent-modules/mcp.nix touches, as an inert stand-in: the default package
# (pkgs.callPackage ../package.nix { }) and the subagent's git; evaluating the module must not need nixpkgs.
{
  git = {
    type = "derivation";
    name = "git-2.47.0";
    outPath = "/nix/store/11111111111111111111111111111111-git-2.47.0";
  };
  callPackage = _fn: _args: {
    type = "derivation";
    name = "hive-daemons-0.1.0";
    outPath = "/nix/store/00000000000000000000000000000000-hive-daemons-0.1.0";
  };
}
