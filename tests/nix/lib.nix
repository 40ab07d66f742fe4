# A stand-in for the part of nixpkgs' `lib` that nix/agent-modules/mcp.nix, nix/package.nix and these tests
# use, because nixpkgs is on no package registry CI can reach. It follows the real module system's rules
# where the tests depend on them:
#   - mkIf / mkMerge are resolved first, then only the definitions of the best priority are kept
#     (plain = 100, mkDefault = 1000, mkForce = 50, an option's default = 1500), per attribute for attrsOf;
#   - two different definitions of one single-valued option at the same priority are an error;
#   - every value is checked against its option's type; defining an undeclared option is an error;
#   - options.<path>.definitionsWithLocations lists { file, value } after the priority filter, with
#     mkDefault wrappers nested inside a value left in place (so a test can read their priority).
# Whatever the real lib does beyond that (submodules, ordering, documentation rendering) is not here; the
# same tests run against the real lib when HIVE_NIXPKGS_LIB names a checkout of it (tests/nix/test_module.py).
let
  inherit (builtins)
    all any attrNames concatLists concatStringsSep filter foldl' functionArgs head intersectAttrs isAttrs
    isBool isFunction isInt isList isPath isString length listToAttrs map mapAttrs match tail;

  # --- plain helpers the module uses -------------------------------------------------------------------
  mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (attrNames attrs);
  optionalAttrs = cond: attrs: if cond then attrs else { };
  literalExpression = text: { _type = "literalExpression"; inherit text; };
  makeBinPath = paths: concatStringsSep ":" (map (p: "${p}/bin") paths);

  # --- definitions and their properties ----------------------------------------------------------------
  mkOption = attrs: attrs // { _type = "option"; };
  mkOverride = priority: content: { _type = "override"; inherit priority content; };
  mkDefault = mkOverride 1000;
  mkForce = mkOverride 50;
  mkIf = condition: content: { _type = "if"; inherit condition content; };
  mkMerge = contents: { _type = "merge"; inherit contents; };

  kind = v: if isAttrs v then v._type or null else null;
  showPath = concatStringsSep ".";

  # Resolve mkIf and mkMerge into a list of values; an mkOverride stays, around each of its resolved values.
  discharge = v:
    if kind v == "if" then (if v.condition then discharge v.content else [ ])
    else if kind v == "merge" then concatLists (map discharge v.contents)
    else if kind v == "override" then map (mkOverride v.priority) (discharge v.content)
    else [ v ];

  # Keep the definitions of the best (lowest) priority, unwrapped.
  filterOverrides = defs:
    let
      prio = d: if kind d.value == "override" then d.value.priority else 100;
      best = foldl' (m: d: if prio d < m then prio d else m) 9999 defs;
      strip = d: if kind d.value == "override" then d // { value = d.value.content; } else d;
    in
    { highestPrio = best; values = map strip (filter (d: prio d == best) defs); };

  # --- types -------------------------------------------------------------------------------------------
  mkOptionType = { name, description ? name, check, merge ? mergeEqual }:
    { _type = "option-type"; inherit name description check merge; };

  mergeEqual = loc: defs:
    let first = (head defs).value; in
    if all (d: d.value == first) defs then first
    else throw "The option `${showPath loc}' has conflicting definition values in: ${concatStringsSep ", " (map (d: d.file) defs)}";

  # Check every definition against the type, then merge them with the type's own rule.
  mergeChecked = loc: type: defs:
    let bad = filter (d: !type.check d.value) defs; in
    if bad != [ ] then throw "The option `${showPath loc}' has a value that is not of type `${type.description}' (in ${(head bad).file})"
    else type.merge loc defs;

  types = rec {
    str = mkOptionType { name = "str"; description = "string"; check = isString; };
    bool = mkOptionType { name = "bool"; description = "boolean"; check = isBool; };
    strMatching = pattern: mkOptionType {
      name = "strMatching";
      description = "string matching the pattern ${pattern}";
      check = x: isString x && match pattern x != null;
    };
    port = mkOptionType { name = "port"; check = x: isInt x && x >= 0 && x <= 65535; };
    ints.positive = mkOptionType { name = "positiveInt"; description = "positive integer"; check = x: isInt x && x > 0; };
    package = mkOptionType { name = "package"; check = x: isAttrs x && x.type or null == "derivation"; };
    attrs = mkOptionType {
      name = "attrs";
      description = "attribute set";
      check = isAttrs;
      merge = _loc: defs: foldl' (acc: d: acc // d.value) { } defs;
    };
    either = a: b: mkOptionType {
      name = "either";
      description = "${a.description} or ${b.description}";
      check = x: a.check x || b.check x;
      merge = loc: defs:
        if all (d: a.check d.value) defs then a.merge loc defs
        else if all (d: b.check d.value) defs then b.merge loc defs
        else mergeEqual loc defs;
    };
    nullOr = t: mkOptionType {
      name = "nullOr";
      description = "null or ${t.description}";
      check = x: x == null || t.check x;
      merge = loc: defs:
        if all (d: d.value == null) defs then null
        else if any (d: d.value == null) defs then throw "The option `${showPath loc}' is defined both null and not null"
        else t.merge loc defs;
    };
    listOf = t: mkOptionType {
      name = "listOf";
      description = "list of ${t.description}";
      check = isList;
      merge = loc: defs: concatLists (map
        (d: map (x: mergeChecked (loc ++ [ "*" ]) t [ { inherit (d) file; value = x; } ]) d.value)
        defs);
    };
    attrsOf = t: mkOptionType {
      name = "attrsOf";
      description = "attribute set of ${t.description}";
      check = isAttrs;
      merge = loc: defs:
        let
          names = attrNames (foldl' (acc: d: acc // d.value) { } defs);
          defsOf = n: concatLists (map
            (d: if d.value ? ${n} then map (v: { inherit (d) file; value = v; }) (discharge d.value.${n}) else [ ])
            defs);
          entry = n:
            let kept = (filterOverrides (defsOf n)).values; in
            if kept == [ ] then [ ] else [ { name = n; value = mergeChecked (loc ++ [ n ]) t kept; } ];
        in
        listToAttrs (concatLists (map entry names));
    };
  };

  # --- evalModules, reduced --------------------------------------------------------------------------
  isOption = v: kind v == "option";

  evalModules = { modules, specialArgs ? { } }:
    let
      args = { inherit config options lib; } // specialArgs;
      call = f: let wanted = functionArgs f; in f (if wanted == { } then args else intersectAttrs wanted args);

      # A module: a path, a function or an attribute set; full form ({ options, config }) or shorthand.
      load = m:
        let
          file = if isPath m || isString m then toString m else "<unknown-file>";
          raw = if isPath m || isString m then import m else m;
          v = if isFunction raw then call raw else raw;
          full = v ? options || v ? config;
          body = {
            inherit file;
            options = if full then v.options or { } else { };
            config = if full then v.config or { } else removeAttrs v [ "imports" ];
          };
        in
        [ body ] ++ concatLists (map load (v.imports or [ ]));
      loaded = concatLists (map load modules);

      mergeDecls = a: b: a // mapAttrs
        (n: bv:
          if !(a ? ${n}) then bv
          else if isOption bv || isOption a.${n} then throw "The option `${n}' is declared twice"
          else mergeDecls a.${n} bv)
        b;
      decls = foldl' mergeDecls { } (map (m: m.options) loaded);

      # The values a module defines at `path`, looking through mkIf/mkMerge and pushing mkOverride down.
      children = name: v:
        if kind v == "if" then (if v.condition then children name v.content else [ ])
        else if kind v == "merge" then concatLists (map (children name) v.contents)
        else if kind v == "override" then map (mkOverride v.priority) (children name v.content)
        else if isAttrs v && v ? ${name} then [ v.${name} ]
        else [ ];
      valuesAt = path: vs:
        if path == [ ] then concatLists (map discharge vs)
        else valuesAt (tail path) (concatLists (map (children (head path)) vs));
      defsAt = path: concatLists (map
        (m: map (value: { inherit (m) file; inherit value; }) (valuesAt path [ m.config ]))
        loaded);

      evalOption = path: opt:
        let
          filtered = filterOverrides (defsAt path);
          chosen =
            if filtered.values != [ ] then filtered.values
            else if opt ? default then [ { file = "<default>"; value = opt.default; } ]
            else throw "The option `${showPath path}' is used but not defined.";
        in
        opt // {
          value = mergeChecked path opt.type chosen;
          definitionsWithLocations = filtered.values;
          highestPrio = if filtered.values != [ ] then filtered.highestPrio else 1500;
          isDefined = filtered.values != [ ] || opt ? default;
        };

      evalDecls = path: tree: mapAttrs
        (n: v: if isOption v then evalOption (path ++ [ n ]) v else evalDecls (path ++ [ n ]) v)
        tree;
      options = evalDecls [ ] decls;

      # Every defined path must lead to a declared option.
      strip = v: concatLists (map (x: if kind x == "override" then strip x.content else [ x ]) (discharge v));
      undeclared = path: decl: v:
        if isOption decl then [ ]
        else concatLists (map
          (x: if !isAttrs x then [ (showPath path) ] else concatLists (map
            (n: if decl ? ${n} then undeclared (path ++ [ n ]) decl.${n} x.${n} else [ (showPath (path ++ [ n ])) ])
            (attrNames x)))
          (strip v));
      unknown = concatLists (map (m: undeclared [ ] decls m.config) loaded);

      # Modules see the plain values; the result's config is checked first (a module's mkIf condition may
      # read config, so checking inside the fixpoint would recurse).
      values = tree: mapAttrs (_: v: if isOption v then v.value else values v) tree;
      config = values options;
    in
    {
      inherit options;
      config = if unknown != [ ] then throw "The option `${head unknown}' does not exist." else config;
    };

  lib = {
    inherit mapAttrsToList optionalAttrs literalExpression makeBinPath;
    inherit mkOption mkOverride mkDefault mkForce mkIf mkMerge types evalModules;
    inherit (builtins) concatStringsSep filter;
  };
in
lib
