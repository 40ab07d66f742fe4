# Evaluates nix/package.nix against tests/nix/stub-python.nix with the given package versions (JSON:
# name -> version; a name left out is a package this nixpkgs lacks) and dependencies among them (JSON:
# name -> names), and returns what the tests check: which
# pins were carried, and every package of the runtime closure with its version and origin.
{ versionsJson, dependsOnJson ? "{}" }:

let
  lib = import ./lib.nix;
  python3 = import ./stub-python.nix {
    versions = builtins.fromJSON versionsJson;
    dependsOn = builtins.fromJSON dependsOnJson;
  };
  drv = import ../../nix/package.nix {
    inherit lib python3;
    bash = { outPath = "/nix/store/00000000000000000000000000000000-bash"; };
  };

  describe = p: {
    name = p.pname;
    value = {
      inherit (p) version fromNixpkgs;
      src = p.src or null;
      pythonImportsCheck = p.pythonImportsCheck or null;
      dependencies = map (d: d.pname) (p.dependencies or [ ]);
    };
  };
  closure = ps: builtins.concatLists (map (p: [ p ] ++ closure (p.dependencies or [ ])) ps);
  everything = closure drv.dependencies;
in
{
  inherit (drv) pname version makeWrapperArgs pythonImportsCheck;
  inherit (drv.passthru) carriedFromPypi pythonRequires;
  buildSystem = map (d: d.pname) drv.build-system;
  dependencies = map (d: d.pname) drv.dependencies;
  # Every (name, version) met in the closure: two versions of one name would be a conflict in a real build.
  nameVersions = map (p: "${p.pname}==${p.version}") everything;
  packages = builtins.listToAttrs (map describe everything);
}
