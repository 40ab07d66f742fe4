# The hive daemons in an agent container: hive-bash-daemon (background shell tasks) and hive-subagent-daemon
# (nested claude sessions), each a systemd service serving MCP over streamable HTTP on loopback, and each
# registered with the harness as an MCP server for claude.
#
# Declared by the harness, not here (this module only sets them):
#   hyperhive.extraMcpServers  attrs of MCP server entries the harness hands to claude (--mcp-config,
#                              --allowedTools mcp__<name>__*)
#   hyperhive.agentSocket      the harness's in-agent Unix socket for keyed todos (null: none); passed to
#                              both daemons as HIVE_AGENT_SOCKET
#
# The systemd settings themselves (notify readiness, kill mode and stop timeout, state directory, hardening
# and why each usual hardening option is left off) live in ../systemd/units.nix, shared with the plain
# units in ../systemd/*.service, so the two deployments cannot drift apart.
{ config, lib, pkgs, ... }:

let
  inherit (lib) mkOption mkDefault types;
  cfg = config.hyperhive.mcp;
  units = import ../systemd/units.nix;

  toolList = tools: lib.concatStringsSep ", " (map (t: "`${t}`") tools);

  # One agent-facing MCP server entry: plain HTTP to the daemon on loopback, every tool allowed.
  mcpEntry = port: {
    type = "http";
    url = "http://127.0.0.1:${toString port}/mcp";
    allowedTools = [ "*" ];
  };

  # Everything the daemon's tasks and claude may call, in login-shell order: setuid wrappers (sudo) first,
  # then the user's profile, the default profile and the system profile, then the operator's additions.
  servicePath = [
    "/run/wrappers"
    "/etc/profiles/per-user/${cfg.user}"
    "/nix/var/nix/profiles/default"
    "/run/current-system/sw"
  ] ++ cfg.path;

  # d: one of units.daemons with this configuration's state directory; ownPath: what this daemon itself
  # calls, after everything else (the user's own version wins); env: its own variables.
  mkService = d: ownPath: env: {
    inherit (d) description;
    wantedBy = [ "multi-user.target" ];
    inherit (units) unitConfig;
    path = servicePath ++ ownPath;
    environment = units.environment d
      // lib.optionalAttrs (config.hyperhive.agentSocket != null) {
        HIVE_AGENT_SOCKET = toString config.hyperhive.agentSocket;
      }
      // lib.optionalAttrs sharing {
        # Names: the daemon resolves them at start (an unknown name refuses the start, naming it).
        "${d.envPrefix}_ALLOW_UID" = cfg.agentUser;
        "${d.envPrefix}_SHARE_GROUP" = agentGroup;
      }
      // lib.optionalAttrs (cfg.metricsScrapers != [ ]) {
        # Names too; click splits the variable on whitespace.
        "${d.envPrefix}_METRICS_ALLOW_UID" = lib.concatStringsSep " " cfg.metricsScrapers;
      }
      // lib.optionalAttrs (cfg.tokenFile != null) {
        # systemd copies the token (LoadCredential below) to this root-owned, unit-private path,
        # readable by the unit's user even when the operator's file is readable by root alone.
        "${d.envPrefix}_TOKEN_FILE" = "/run/credentials/${d.unit}.service/token";
      }
      // env;
    serviceConfig = units.serviceConfig d
      // lib.optionalAttrs (cfg.user == "root") units.rootOnlyHardening
      // {
        ExecStart = "${cfg.package}/bin/${d.command}";
        # Set even for root: User= is what makes systemd set HOME, where claude keeps its transcripts.
        User = cfg.user;
        WorkingDirectory = cfg.workingDirectory;
      }
      // lib.optionalAttrs sharing {
        # The agent's group reads task records and outputs (0640, directories 2750): the umask must let the
        # group bits through, and the daemon must be in that group to give its directories to it.
        UMask = "0027";
        StateDirectoryMode = "2750";
        SupplementaryGroups = [ agentGroup ];
      }
      // lib.optionalAttrs (cfg.tokenFile != null) { LoadCredential = "token:${cfg.tokenFile}"; };
  };

  # The daemons run as a user other than the agent's: the agent may call them and read their task files.
  sharing = cfg.agentUser != null && cfg.agentUser != cfg.user;
  agentGroup = config.users.users.${cfg.agentUser}.group or cfg.agentUser;

  bash = units.daemons.bash // { stateDirectory = cfg.bashStateDirectory; };
  subagent = units.daemons.subagent // { stateDirectory = cfg.subagentStateDirectory; };

  # The agent's claude finds user skills in <config dir>/skills/<name>/SKILL.md (a symlinked folder loads too:
  # checked with claude 2.1.328). The folder is copied to the store from this source tree, the package's own.
  skillSource = ../../hivesubagent/skills/claude-subagents;
  userHome = config.users.users.${cfg.user}.home or (if cfg.user == "root" then "/root" else "/home/${cfg.user}");

  extraEnvEntries = lib.mapAttrsToList (k: v: "${k}=${v}") cfg.subagentExtraEnv;
  # click splits a multiple-value option's environment variable on whitespace.
  badExtraEnv = lib.filter (e: builtins.match "[^[:space:]]*" e == null) extraEnvEntries;
  badCwdRoots = lib.filter (r: builtins.match "/[^[:space:]]*" r == null) cfg.subagentAllowedCwdRoots;
in
{
  options.hyperhive.mcp = {
    package = mkOption {
      type = types.package;
      default = pkgs.callPackage ../package.nix { };
      defaultText = lib.literalExpression "pkgs.callPackage ./nix/package.nix { }";
      description = "The hive-daemons package providing hive-bash-daemon and hive-subagent-daemon.";
    };

    user = mkOption {
      type = types.str;
      default = "root";
      example = "agent";
      description = ''
        User both daemons run as, and so the user of every bash task and subagent: the agent's own user, so
        the agent can read task outputs and resume claude sessions (claude keeps them under this user's HOME).
        For a user other than root, ProtectHostname and RestrictRealtime are not set: systemd would imply
        NoNewPrivileges=yes for them, which breaks sudo inside tasks, and the kernel refuses both anyway.
      '';
    };

    agentUser = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "agent";
      description = ''
        The agent's user, when the daemons run as another `user`: its uid may call both daemons
        (--allow-uid, HIVE_*_ALLOW_UID; every uid but the daemons' own and this one gets 403 on the ports),
        and its primary group may read the state directories' task records and outputs (--share-group:
        directories 2750, files 0640, UMask=0027, the group added to the daemons' SupplementaryGroups).
        Unset (the default): the agent is `user` itself, one user for both.
      '';
    };

    metricsScrapers = mkOption {
      type = types.listOf (types.strMatching "[^[:space:]]+");
      default = [ ];
      example = [ "prometheus" ];
      description = ''
        Local users that may scrape both daemons' GET /metrics (and /healthz), and nothing else: every other
        path answers them 403 (--metrics-allow-uid, HIVE_*_METRICS_ALLOW_UID). For a Prometheus on this
        machine (the same network namespace as the daemons: they listen on 127.0.0.1), e.g.

          hyperhive.mcp.metricsScrapers = [ "prometheus" ];
          services.prometheus.scrapeConfigs = [{
            job_name = "hive";
            static_configs = [{ targets = [ "127.0.0.1:''${toString config.hyperhive.mcp.bashHttpPort}"
                                            "127.0.0.1:''${toString config.hyperhive.mcp.subagentHttpPort}" ]; }];
          }];

        With `tokenFile` set, the scraper sends the token too (`authorization.credentials_file`). Empty (the
        default): only the daemons' own user (and `agentUser`) may read /metrics.
      '';
    };

    workingDirectory = mkOption {
      type = types.str;
      default = "~";
      example = "/home/agent/work";
      description = ''
        Working directory of both daemons: where bash tasks start (unless a `run` passes `cwd`) and where
        subagent sessions run (claude keys its transcripts by this directory). `~` is the user's home.
      '';
    };

    path = mkOption {
      type = types.listOf (types.either types.package types.str);
      default = [ ];
      example = lib.literalExpression "[ pkgs.git pkgs.gnumake ]";
      description = ''
        Packages added to the PATH of both daemons, after the user's, the default and the system profile.
      '';
    };

    subagentGit = mkOption {
      type = types.package;
      default = pkgs.git;
      defaultText = lib.literalExpression "pkgs.git";
      description = ''
        The git hive-subagent-daemon runs for a session's own worktree (`start(worktree=true)`) and for
        `hive-subagent diff`: last on its PATH, so a git of the user's profile or the system comes first.
      '';
    };

    tokenFile = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "/run/secrets/hive-mcp-token";
      description = ''
        File holding a bearer token every MCP request must carry (both daemons). A string, not a path, so
        the secret is never copied into the world-readable Nix store. Handed to the daemons with systemd's
        LoadCredential=. Needed only to listen beyond loopback; when set, the harness's MCP entries must send
        `Authorization: Bearer <token>` too.
      '';
    };

    bashHttpPort = mkOption {
      type = types.port;
      default = units.daemons.bash.port;
      description = ''
        TCP port on 127.0.0.1 where hive-bash-daemon serves MCP over streamable HTTP
        (http://127.0.0.1:<port>/mcp). It serves the tools ${toolList units.daemons.bash.tools}
        (mcp__bash__<tool> in claude); `hyperhive.extraMcpServers.bash` points here.
      '';
    };

    subagentHttpPort = mkOption {
      type = types.port;
      default = units.daemons.subagent.port;
      description = ''
        TCP port on 127.0.0.1 where hive-subagent-daemon serves MCP over streamable HTTP
        (http://127.0.0.1:<port>/mcp). It serves ${toString (builtins.length units.daemons.subagent.tools)}
        tools: ${toolList units.daemons.subagent.tools} (mcp__subagent__<tool> in claude);
        `hyperhive.extraMcpServers.subagent` points here.
      '';
    };

    bashStateDirectory = mkOption {
      type = types.strMatching "[A-Za-z0-9][A-Za-z0-9._-]*";
      default = units.daemons.bash.stateDirectory;
      description = ''
        Name of hive-bash-daemon's state directory under /var/lib (systemd's StateDirectory=, mode 0700):
        task outputs (bash-tasks/<id>.out, .err), task records and the todo outbox.
      '';
    };

    subagentStateDirectory = mkOption {
      type = types.strMatching "[A-Za-z0-9][A-Za-z0-9._-]*";
      default = units.daemons.subagent.stateDirectory;
      description = ''
        Name of hive-subagent-daemon's state directory under /var/lib (StateDirectory=, mode 0700): the todo
        outbox and transcript-index.json (what it last read of claude's transcripts, a cache checked before
        use). Sessions themselves are claude's own transcripts under the user's HOME.
      '';
    };

    bashMaxRunning = mkOption {
      type = types.ints.positive;
      default = units.daemons.bash.maxRunning;
      description = "Bash tasks running at once; later ones wait as `pending` in submission order.";
    };

    subagentMaxRunning = mkOption {
      type = types.ints.positive;
      default = units.daemons.subagent.maxRunning;
      description = "Subagent sessions running at once (each is a full claude); a `start` past this is refused.";
    };

    claudeBin = mkOption {
      type = types.str;
      default = "claude";
      example = lib.literalExpression ''"''${pkgs.claude-code}/bin/claude"'';
      description = "The claude CLI hive-subagent-daemon runs: a name on the service's PATH, or a path.";
    };

    subagentExtraEnv = mkOption {
      type = types.attrsOf types.str;
      default = { IS_SANDBOX = "1"; };
      example = { IS_SANDBOX = "1"; ANTHROPIC_BASE_URL = "http://127.0.0.1:8080"; };
      description = ''
        Extra environment for every claude the subagent daemon starts (HIVE_SUBAGENT_EXTRA_ENV). Values must
        not contain whitespace. IS_SANDBOX=1 lets claude's --dangerously-skip-permissions run as root: the
        agent container is the sandbox.
      '';
    };

    subagentAllowedCwdRoots = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [ "/home/agent/projects" "/srv/repos" ];
      description = ''
        Directory trees a subagent `start` may name as its `cwd` (HIVE_SUBAGENT_ALLOWED_CWD_ROOTS, the daemon's
        --allowed-cwd-roots): absolute paths without whitespace. Empty (the default): workingDirectory's tree
        only, the files the unit may write anyway. Worktrees (`start(worktree=true)`) live in the state
        directory whatever this says.
      '';
    };

    bashEnvironment = mkOption {
      type = types.attrsOf types.str;
      default = { };
      example = { HIVE_BASH_KEEP_DAYS = "3"; HIVE_BASH_LOG_LEVEL = "debug"; };
      description = ''
        Further environment for hive-bash-daemon: any of its knobs as HIVE_BASH_* variables
        (`hive-bash-daemon --help` lists each with its variable). Tasks inherit this environment.
      '';
    };

    subagentSkill = mkOption {
      type = types.bool;
      default = true;
      description = ''
        Install the `claude-subagents` skill (hivesubagent/skills/claude-subagents/SKILL.md: when delegating
        to subagents pays off, how to write the prompt file, watch, budget and read the result) where the
        agent's claude finds it: a link at <claudeConfigDir>/skills/claude-subagents (systemd-tmpfiles).
      '';
    };

    claudeConfigDir = mkOption {
      type = types.str;
      default = "${userHome}/.claude";
      defaultText = lib.literalExpression ''"''${config.users.users.''${user}.home}/.claude"'';
      description = ''
        The agent's claude configuration directory ($CLAUDE_CONFIG_DIR if the harness sets one, else ~/.claude
        of `user`): where subagentSkill installs the skill.
      '';
    };

    subagentEnvironment = mkOption {
      type = types.attrsOf types.str;
      default = { };
      example = { HIVE_SUBAGENT_TURN_TIMEOUT = "3600"; };
      description = ''
        Further environment for hive-subagent-daemon: any of its knobs as HIVE_SUBAGENT_* variables
        (`hive-subagent-daemon --help` lists each with its variable). claude inherits this environment.
      '';
    };
  };

  config = {
    assertions = [
      {
        assertion = badExtraEnv == [ ];
        message = "hyperhive.mcp.subagentExtraEnv: values must not contain whitespace "
          + "(HIVE_SUBAGENT_EXTRA_ENV is split on it): ${lib.concatStringsSep ", " badExtraEnv}";
      }
      {
        assertion = badCwdRoots == [ ];
        message = "hyperhive.mcp.subagentAllowedCwdRoots: each must be an absolute path without whitespace "
          + "(HIVE_SUBAGENT_ALLOWED_CWD_ROOTS is split on it): ${lib.concatStringsSep ", " badCwdRoots}";
      }
    ];

    # Defaults, not plain definitions, so an agent.nix can still override or drop either entry with one
    # ordinary definition of its own (which outranks mkDefault), no patch to this module needed.
    # The subagent entry is default-on for now, like bash; it is meant to become a real capability gate
    # (opt-in per agent) later. Until then, dropping an entry hides the tools from claude, while the daemon
    # keeps listening on loopback: not yet a security boundary.
    hyperhive.extraMcpServers = {
      bash = mkDefault (mcpEntry cfg.bashHttpPort);
      subagent = mkDefault (mcpEntry cfg.subagentHttpPort);
    };

    # d: created 0700 for the user if missing (an existing directory keeps its group); L+: the link, replaced
    # on every activation so it follows the current package.
    systemd.tmpfiles.rules = if !cfg.subagentSkill then [ ] else [
      "d ${cfg.claudeConfigDir} 0700 ${cfg.user} - -"
      "d ${cfg.claudeConfigDir}/skills 0700 ${cfg.user} - -"
      "L+ ${cfg.claudeConfigDir}/skills/claude-subagents - - - - ${skillSource}"
    ];

    # The operator CLIs (hive-bash, hive-subagent, hive-todos) on PATH, finding the daemons as the services
    # are configured: the ports, and the state directory where hive-subagent-daemon records its working
    # directory (so `hive-subagent log NAME` reads the right project folder from any directory).
    environment.systemPackages = [ cfg.package ];
    environment.variables = {
      HIVE_BASH_PORT = toString cfg.bashHttpPort;
      HIVE_SUBAGENT_PORT = toString cfg.subagentHttpPort;
      HIVE_SUBAGENT_STATE_DIR = "/var/lib/${cfg.subagentStateDirectory}";
    };

    systemd.services = {
      # hive-bash: serves run, status, send, kill, list (mcp__bash__*) on bashHttpPort.
      ${bash.unit} = mkService bash [ ] ({
        HIVE_BASH_PORT = toString cfg.bashHttpPort;
        HIVE_BASH_MAX_RUNNING = toString cfg.bashMaxRunning;
      } // cfg.bashEnvironment);

      # hive-subagent: serves start, continue, interrupt, status (mcp__subagent__*) on subagentHttpPort.
      # git: a session's worktree (start(worktree=true)) and `hive-subagent diff`.
      ${subagent.unit} = mkService subagent [ cfg.subagentGit ] ({
        HIVE_SUBAGENT_PORT = toString cfg.subagentHttpPort;
        HIVE_SUBAGENT_MAX_RUNNING = toString cfg.subagentMaxRunning;
        HIVE_SUBAGENT_CLAUDE_BIN = cfg.claudeBin;
      } // lib.optionalAttrs (extraEnvEntries != [ ]) {
        HIVE_SUBAGENT_EXTRA_ENV = lib.concatStringsSep " " extraEnvEntries;
      } // lib.optionalAttrs (cfg.subagentAllowedCwdRoots != [ ]) {
        HIVE_SUBAGENT_ALLOWED_CWD_ROOTS = lib.concatStringsSep " " cfg.subagentAllowedCwdRoots;
      } // cfg.subagentEnvironment);
    };
  };
}
