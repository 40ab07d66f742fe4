# What nix/agent-modules/mcp.nix assumes exists outside it, declared here so the test can evaluate it alone.
# In a real agent these come from NixOS (systemd.services, assertions) and from the harness's own module
# (hyperhive.*); the types are the loosest that still let the test see what the module defines.
{ lib, ... }:

let
  inherit (lib) mkOption types;
in
{
  options = {
    # The harness's MCP server list. `nullOr` so an agent.nix can drop an entry with `= null`, and so two
    # definitions of one entry at the same priority are an error here, as they would be in a real harness:
    # that is what makes this test see whether mcp.nix's entries really are defaults.
    hyperhive.extraMcpServers = mkOption {
      type = types.attrsOf (types.nullOr types.attrs);
      default = { };
      description = "MCP servers the harness gives claude, by server name.";
    };

    # The harness's in-agent Unix socket for keyed todos; mcp.nix passes it on as HIVE_AGENT_SOCKET.
    hyperhive.agentSocket = mkOption {
      type = types.nullOr types.str;
      default = null;
      description = "The harness's in-agent socket.";
    };

    # NixOS's own, reduced to a bag of attributes per service: the test reads what the module sets.
    systemd.services = mkOption {
      type = types.attrsOf types.attrs;
      default = { };
      description = "systemd services.";
    };

    systemd.tmpfiles.rules = mkOption {
      type = types.listOf types.str;
      default = [ ];
      description = "systemd-tmpfiles lines.";
    };

    environment.systemPackages = mkOption {
      type = types.listOf types.anything;
      default = [ ];
      description = "Packages on every user's PATH.";
    };

    environment.variables = mkOption {
      type = types.attrsOf types.str;
      default = { };
      description = "Variables of every login shell.";
    };

    assertions = mkOption {
      type = types.listOf types.attrs;
      default = [ ];
      description = "NixOS assertions.";
    };
  };
}
