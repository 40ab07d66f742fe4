"""nix/agent-modules/mcp.nix evaluated with lib.evalModules: the MCP entries it injects (and that they yield to
an agent.nix), the two services it generates, and the option descriptions an operator reads."""

import re
import subprocess

import pytest
from kit.nixtest import BASH_TOOLS, REPO, SUBAGENT_TOOLS, NixError
MODULE_FILE = "nix/agent-modules/mcp.nix"


def entry(port: int) -> dict:
    return {"type": "http", "url": f"http://127.0.0.1:{port}/mcp", "allowedTools": ["*"]}


def test_injects_both_mcp_servers_as_http_entries_allowing_every_tool(evaluate_module):
    result = evaluate_module()
    assert result["servers"] == {"bash": entry(7711), "subagent": entry(7712)}
    assert result["failedAssertions"] == []


def test_both_entries_are_mkdefault_priority_1000(evaluate_module):
    # The module's own definitions, before merging: each entry wrapped in lib.mkDefault.
    [definition] = evaluate_module()["serverDefinitions"]
    for name in ("bash", "subagent"):
        assert definition[name]["_type"] == "override", name
        assert definition[name]["priority"] == 1000, name


def test_entry_urls_follow_the_port_options(evaluate_module):
    result = evaluate_module("{ hyperhive.mcp.bashHttpPort = 8811; hyperhive.mcp.subagentHttpPort = 8812; }")
    assert result["servers"] == {"bash": entry(8811), "subagent": entry(8812)}
    assert result["services"]["hive-bash"]["environment"]["HIVE_BASH_PORT"] == "8811"
    assert result["services"]["hive-subagent"]["environment"]["HIVE_SUBAGENT_PORT"] == "8812"


def test_the_operator_clis_are_on_path_and_find_the_daemons(evaluate_module):
    result = evaluate_module("{ hyperhive.mcp.bashHttpPort = 8811; hyperhive.mcp.subagentStateDirectory = \"sub\"; }")
    assert result["operatorPackages"] == 1
    assert result["operatorVariables"] == {"HIVE_BASH_PORT": "8811", "HIVE_SUBAGENT_PORT": "7712",
                                           "HIVE_SUBAGENT_STATE_DIR": "/var/lib/sub"}


def test_an_agent_nix_overrides_an_entry_with_one_plain_definition(evaluate_module):
    mine = '{ type = "http"; url = "http://127.0.0.1:9000/mcp"; allowedTools = [ "run" "status" ]; }'
    result = evaluate_module(f"{{ hyperhive.extraMcpServers.bash = {mine}; }}")
    assert result["servers"]["bash"] == {"type": "http", "url": "http://127.0.0.1:9000/mcp",
                                         "allowedTools": ["run", "status"]}
    assert result["servers"]["subagent"] == entry(7712)


def test_an_agent_nix_drops_the_subagent_entry(evaluate_module):
    result = evaluate_module("{ hyperhive.extraMcpServers.subagent = null; }")
    assert result["servers"]["subagent"] is None
    assert result["servers"]["bash"] == entry(7711)


def test_two_plain_definitions_of_one_entry_conflict(evaluate_module):
    # The control for the two tests above: without mkDefault, the module's entry and an agent.nix's would
    # meet at the same priority and the evaluation would fail instead of letting the agent.nix win.
    with pytest.raises(NixError, match="subagent"):
        evaluate_module(
            "{ hyperhive.extraMcpServers.subagent = null; }",
            '{ hyperhive.extraMcpServers.subagent = { type = "http"; url = "x"; allowedTools = [ ]; }; }',
        )


def test_services_have_the_unit_settings(evaluate_module):
    services = evaluate_module()["services"]
    assert sorted(services) == ["hive-bash", "hive-subagent"]
    for name, command, grace in (("hive-bash", "hive-bash-daemon", 2), ("hive-subagent", "hive-subagent-daemon", 5)):
        sc = services[name]["serviceConfig"]
        assert sc["Type"] == "notify"
        assert sc["Restart"] == "on-failure"
        assert sc["KillMode"] == "mixed"
        # The stop timeout covers the daemon's own escalation (SIGINT/SIGTERM, grace, SIGKILL) plus its bookkeeping.
        assert sc["TimeoutStopSec"] >= grace + 15
        assert services[name]["environment"][f"{name.upper().replace('-', '_')}_KILL_GRACE"] == str(grace)
        assert sc["StateDirectory"] == name
        assert sc["StateDirectoryMode"] == "0700"
        assert sc["UMask"] == "0077"
        assert sc["OOMPolicy"] == "continue"
        assert sc["ProtectHostname"] is True and sc["RestrictRealtime"] is True
        assert sc["CapabilityBoundingSet"].startswith("~CAP_SYS_MODULE ")
        # Nothing that would change what a task sees or break sudo.
        for off in ("NoNewPrivileges", "PrivateTmp", "ProtectSystem", "ProtectHome", "PrivateDevices",
                    "SystemCallFilter", "MemoryDenyWriteExecute", "RestrictNamespaces", "PrivateNetwork"):
            assert off not in sc, off
        assert sc["User"] == "root"
        assert sc["ExecStart"].endswith(f"-hive-daemons-0.1.0/bin/{command}")
        assert services[name]["wantedBy"] == ["multi-user.target"]
        # A lasting failure stops after five starts a minute instead of restarting every 2 s forever.
        assert services[name]["unitConfig"] == {"StartLimitIntervalSec": 60, "StartLimitBurst": 5}
        assert services[name]["path"][0] == "/run/wrappers"  # sudo's setuid wrapper first, as in a login shell


def test_environment_carries_the_options(evaluate_module):
    result = evaluate_module(
        "{ hyperhive.agentSocket = \"/run/hyperhive/agent.sock\"; hyperhive.mcp.bashMaxRunning = 8;"
        " hyperhive.mcp.subagentMaxRunning = 2; hyperhive.mcp.claudeBin = \"/opt/claude/bin/claude\";"
        " hyperhive.mcp.bashStateDirectory = \"agent-bash\";"
        " hyperhive.mcp.subagentExtraEnv = { IS_SANDBOX = \"1\"; ANTHROPIC_BASE_URL = \"http://127.0.0.1:9\"; };"
        " hyperhive.mcp.bashEnvironment = { HIVE_BASH_KEEP_DAYS = \"3\"; }; }"
    )
    bash = result["services"]["hive-bash"]
    sub = result["services"]["hive-subagent"]
    assert bash["environment"] == {
        "HIVE_AGENT_SOCKET": "/run/hyperhive/agent.sock",
        "HIVE_BASH_PORT": "7711",
        "HIVE_BASH_MAX_RUNNING": "8",
        "HIVE_BASH_STATE_DIR": "/var/lib/agent-bash",
        "HIVE_BASH_KILL_GRACE": "2",
        "HIVE_BASH_KEEP_DAYS": "3",
    }
    assert bash["serviceConfig"]["StateDirectory"] == "agent-bash"
    assert sub["environment"]["HIVE_AGENT_SOCKET"] == "/run/hyperhive/agent.sock"
    assert sub["environment"]["HIVE_SUBAGENT_MAX_RUNNING"] == "2"
    assert sub["environment"]["HIVE_SUBAGENT_CLAUDE_BIN"] == "/opt/claude/bin/claude"
    assert sorted(sub["environment"]["HIVE_SUBAGENT_EXTRA_ENV"].split()) == [
        "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "IS_SANDBOX=1"]


def test_allowed_cwd_roots_reach_the_daemon_and_are_checked(evaluate_module):
    sub = evaluate_module('{ hyperhive.mcp.subagentAllowedCwdRoots = [ "/home/agent/projects" "/srv/repos" ]; }')
    assert sub["services"]["hive-subagent"]["environment"]["HIVE_SUBAGENT_ALLOWED_CWD_ROOTS"] == (
        "/home/agent/projects /srv/repos")
    assert "HIVE_SUBAGENT_ALLOWED_CWD_ROOTS" not in evaluate_module()["services"]["hive-subagent"]["environment"]
    [message] = evaluate_module('{ hyperhive.mcp.subagentAllowedCwdRoots = [ "relative" "/a b" ]; }')[
        "failedAssertions"]
    assert "hyperhive.mcp.subagentAllowedCwdRoots" in message and "relative, /a b" in message


def test_no_agent_socket_means_no_variable(evaluate_module):
    for service in evaluate_module()["services"].values():
        assert "HIVE_AGENT_SOCKET" not in service["environment"]


def test_token_file_goes_through_systemd_credentials(evaluate_module):
    services = evaluate_module('{ hyperhive.mcp.tokenFile = "/run/secrets/mcp-token"; }')["services"]
    for name, prefix in (("hive-bash", "HIVE_BASH"), ("hive-subagent", "HIVE_SUBAGENT")):
        assert services[name]["serviceConfig"]["LoadCredential"] == "token:/run/secrets/mcp-token"
        assert services[name]["environment"][f"{prefix}_TOKEN_FILE"] == f"/run/credentials/{name}.service/token"


def test_agent_user_is_allowed_to_call_when_the_daemons_run_as_another(evaluate_module):
    services = evaluate_module('{ hyperhive.mcp.user = "hive"; hyperhive.mcp.agentUser = "agent"; }')["services"]
    for name, prefix in (("hive-bash", "HIVE_BASH"), ("hive-subagent", "HIVE_SUBAGENT")):
        assert services[name]["environment"][f"{prefix}_ALLOW_UID"] == "agent"
        assert services[name]["environment"][f"{prefix}_SHARE_GROUP"] == "agent"  # no users.users entry: its name
        sc = services[name]["serviceConfig"]
        assert sc["UMask"] == "0027" and sc["StateDirectoryMode"] == "2750" and sc["SupplementaryGroups"] == ["agent"]
    for definition in ("{ }", '{ hyperhive.mcp.user = "agent"; hyperhive.mcp.agentUser = "agent"; }'):
        for service in evaluate_module(definition)["services"].values():
            assert not any(k.endswith(("_ALLOW_UID", "_SHARE_GROUP")) for k in service["environment"]), "one user"
            assert service["serviceConfig"]["UMask"] == "0077"


def test_non_root_user_keeps_sudo_working(evaluate_module):
    services = evaluate_module('{ hyperhive.mcp.user = "agent"; '
                               'hyperhive.mcp.workingDirectory = "/home/agent/work"; }')["services"]
    for service in services.values():
        sc = service["serviceConfig"]
        assert sc["User"] == "agent"
        assert sc["WorkingDirectory"] == "/home/agent/work"
        # For a non-root user these two would make systemd imply NoNewPrivileges=yes.
        assert "ProtectHostname" not in sc and "RestrictRealtime" not in sc
        assert "/etc/profiles/per-user/agent" in service["path"]


def test_whitespace_in_extra_env_fails_an_assertion_naming_the_option(evaluate_module):
    result = evaluate_module('{ hyperhive.mcp.subagentExtraEnv = { GREETING = "hello world"; }; }')
    [message] = result["failedAssertions"]
    assert "hyperhive.mcp.subagentExtraEnv" in message and "GREETING=hello world" in message


@pytest.mark.parametrize(
    "definition, option",
    [
        ("hyperhive.mcp.bashHttpPort = 70000;", "bashHttpPort"),
        ("hyperhive.mcp.subagentMaxRunning = 0;", "subagentMaxRunning"),
        ('hyperhive.mcp.bashStateDirectory = "../etc";', "bashStateDirectory"),
        ('hyperhive.mcp.tokenFile = 42;', "tokenFile"),
        ('hyperhive.mcp.metricsScrapers = [ "a b" ];', "metricsScrapers"),
    ],
)
def test_bad_values_are_refused_naming_the_option(evaluate_module, definition, option):
    with pytest.raises(NixError, match=re.escape(option)):
        evaluate_module("{ " + definition + " }")


def test_port_option_descriptions_list_every_tool(evaluate_module):
    options = evaluate_module()["options"]
    for option, tools in (("bashHttpPort", BASH_TOOLS), ("subagentHttpPort", SUBAGENT_TOOLS)):
        description = options[option]["description"]
        named = re.findall(r"`([a-z]+)`", description)
        assert named == tools, (option, description)
    assert "4" in options["subagentHttpPort"]["description"]


def test_option_defaults_match_the_daemons_own(evaluate_module):
    # An operator reading `hive-bash-daemon --help` and the module's options must see the same defaults.
    from common.config import BashSettings, SubagentSettings

    options = evaluate_module()["options"]
    assert options["bashHttpPort"]["default"] == BashSettings.port
    assert options["subagentHttpPort"]["default"] == SubagentSettings.port
    assert options["bashMaxRunning"]["default"] == BashSettings.max_running
    assert options["subagentMaxRunning"]["default"] == SubagentSettings.max_running
    assert options["claudeBin"]["default"] == SubagentSettings.claude_bin


def test_module_comments_beside_the_units_list_every_tool():
    # The comment beside each service is what a reader of mcp.nix sees; it once listed three subagent tools.
    text = (REPO / MODULE_FILE).read_text()
    for unit, tools in (("hive-bash", BASH_TOOLS), ("hive-subagent", SUBAGENT_TOOLS)):
        comment = re.search(rf"# {unit}: serves ([a-z, ]+) \(", text)
        assert comment is not None, unit
        assert comment.group(1).split(", ") == tools


def test_the_claude_subagents_skill_is_linked_where_claude_finds_it(evaluate_module, nix_instantiate):
    """On by default: a tmpfiles link <config dir>/skills/claude-subagents to the skill folder in the store
    (claude 2.1.328 loads user skills from there, symlinked folders included; tests/subagent shows it)."""
    rules = evaluate_module()["tmpfiles"]
    assert rules[:2] == ["d /root/.claude 0700 root - -", "d /root/.claude/skills 0700 root - -"]
    kind, path, *_, target = rules[2].split()
    assert (kind, path) == ("L+", "/root/.claude/skills/claude-subagents")
    assert target.startswith("/nix/store/") and target.endswith("-claude-subagents")
    folder = REPO / "hivesubagent" / "skills" / "claude-subagents"
    assert (folder / "SKILL.md").is_file()
    store_path = subprocess.run([nix_instantiate, "--readonly-mode", "--eval", "-E", f'"${{{folder}}}"'],
                                capture_output=True, text=True, timeout=120, check=True).stdout.strip().strip('"')
    assert target == store_path  # that folder, as the store will hold it
    agent = evaluate_module('{ hyperhive.mcp.user = "agent"; }')["tmpfiles"]
    assert agent[0] == "d /home/agent/.claude 0700 agent - -"
    moved = evaluate_module('{ hyperhive.mcp.claudeConfigDir = "/srv/claude"; }')["tmpfiles"]
    assert moved[2].startswith("L+ /srv/claude/skills/claude-subagents ")
    assert evaluate_module("{ hyperhive.mcp.subagentSkill = false; }")["tmpfiles"] == []


def test_metrics_scrapers_may_read_metrics_of_both_daemons(evaluate_module):
    services = evaluate_module('{ hyperhive.mcp.metricsScrapers = [ "prometheus" "vmagent" ]; }')["services"]
    for name, prefix in (("hive-bash", "HIVE_BASH"), ("hive-subagent", "HIVE_SUBAGENT")):
        assert services[name]["environment"][f"{prefix}_METRICS_ALLOW_UID"] == "prometheus vmagent"
        assert f"{prefix}_ALLOW_UID" not in services[name]["environment"]  # not a caller of /mcp
    for service in evaluate_module()["services"].values():
        assert not any(k.endswith("_METRICS_ALLOW_UID") for k in service["environment"])


def test_the_subagent_daemon_has_git_last_on_its_path(evaluate_module):
    """A session's worktree and `hive-subagent diff` run git: the subagent service carries one, after the user's
    and the system's (theirs wins); the bash daemon's tasks get only what the user has."""
    services = evaluate_module()["services"]
    subagent, bash = services["hive-subagent"]["path"], services["hive-bash"]["path"]
    assert subagent[-1].endswith("-git-2.47.0"), subagent  # a package on the path is its store path
    assert subagent[:-1] == bash and "/run/current-system/sw" in bash
    own = evaluate_module('{ pkgs, ... }: { hyperhive.mcp.subagentGit = pkgs.git // { outPath = "/opt/git"; }; }')
    assert own["services"]["hive-subagent"]["path"][-1] == "/opt/git"
