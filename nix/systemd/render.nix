# Renders nix/systemd/units.nix into the plain unit files for machines without Nix:
# { "hive-bash.service" = "<text>"; "hive-subagent.service" = "<text>"; }.
# `nix/systemd/regenerate` writes them next to this file; tests/nix fails when the committed files differ.
# builtins only: evaluates with a bare nix-instantiate, no nixpkgs.
let
  units = import ./units.nix;
  inherit (builtins) attrNames concatLists concatStringsSep elem filter isBool lessThan listToAttrs map sort;

  # Where docs/operations.md installs the project (a virtualenv) on a machine without Nix.
  binDir = "/opt/hive-daemons/bin";

  value = v: if isBool v then (if v then "yes" else "no") else toString v;

  render = name: d:
    let
      envFile = "/etc/hive-daemons/${name}.env";
      service = units.serviceConfig d // units.rootOnlyHardening // {
        ExecStart = "${binDir}/${d.command}";
        # Root, like the agent in its container; HOME (claude's transcripts) follows User=.
        User = "root";
        # The user's home: bash tasks start here, subagent sessions run (and are keyed by claude) here.
        WorkingDirectory = "~";
      };
      first = [ "Type" "ExecStart" "User" "WorkingDirectory" ];
      rest = sort lessThan (filter (k: !elem k first) (attrNames service));
      env = units.environment d;
      tools = concatStringsSep ", " d.tools;
    in
    concatStringsSep "\n" (concatLists [
      [
        "# ${d.unit}.service: generated from nix/systemd/units.nix by nix/systemd/regenerate; edit that file, not this one."
        "#"
        "# ${d.command} serves the MCP tools ${tools}"
        "# at http://127.0.0.1:${toString d.port}/mcp (Claude Code names them mcp__${name}__<tool>)."
        "# Install and connect: docs/operations.md. Configure in ${envFile} with ${d.envPrefix}_* variables,"
        "# one per knob (`${d.command} --help` lists them all with their variables); it overrides Environment= below."
        "# To run as the agent's own user: `systemctl edit ${d.unit}` with User=NAME, ProtectHostname=no and"
        "# RestrictRealtime=no (for a non-root user systemd would add NoNewPrivileges=yes for those two, breaking sudo)."
        ""
        "[Unit]"
        "Description=${d.description}"
      ]
      (map (k: "${k}=${value units.unitConfig.${k}}") (sort lessThan (attrNames units.unitConfig)))
      [
        ""
        "[Service]"
      ]
      (map (k: "${k}=${value service.${k}}") first)
      (map (k: "Environment=${k}=${env.${k}}") (sort lessThan (attrNames env)))
      [ "EnvironmentFile=-${envFile}" ]
      (map (k: "${k}=${value service.${k}}") rest)
      [ "# Hardening left off on purpose (the daemon runs arbitrary commands for the agent):" ]
      (map (o: "#   ${o.option}: ${o.why}") units.hardeningLeftOff)
      [
        ""
        "[Install]"
        "WantedBy=multi-user.target"
        ""
      ]
    ]);
in
listToAttrs (map
  (name: { name = "${units.daemons.${name}.unit}.service"; value = render name units.daemons.${name}; })
  (attrNames units.daemons))
