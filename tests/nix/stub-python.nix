# A stand-in for nixpkgs' python3, enough for nix/package.nix. `pkgs` is a Python set built as nixpkgs
# builds it, a fixpoint: each package is a { pname, version } record (the versions given) whose dependencies
# (`dependsOn`: name -> names) are taken from the final set, so an overlay that replaces a package replaces it
# for every package that depends on it. `override { packageOverrides }` lays such an overlay over the set the
# way nixpkgs does, and the two builders and fetchPypi return their arguments, so a test reads what each
# package would be built from. `fromNixpkgs` tells the set's own packages from those package.nix builds.
{ versions, dependsOn ? { } }:

let
  package = self: name: version: {
    pname = name;
    inherit version;
    fromNixpkgs = true;
    dependencies = map (d: self.${d}) (dependsOn.${name} or [ ]);
  } // (if name == "pyjwt" then {
    optional-dependencies.crypto = [ { pname = "cryptography"; version = "46.0.3"; fromNixpkgs = true; } ];
  } else { });

  builders = {
    buildPythonPackage = args: args // { fromNixpkgs = false; };
    buildPythonApplication = args: args;
    fetchPypi = args: args;
  };

  # f: the final set -> the set.
  make = f: {
    pkgs = let final = f final; in final;
    override = { self ? null, packageOverrides }: make (final: let super = f final; in super // packageOverrides final super);
  };
in
make (final: builtins.mapAttrs (package final) versions // builders)
