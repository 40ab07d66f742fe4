# The systemd settings of both daemons: the one source of truth.
#
# Two consumers read this file and nothing else for these settings:
#   - nix/agent-modules/mcp.nix, the NixOS module, builds its two services from it;
#   - nix/systemd/render.nix renders it into the plain units nix/systemd/*.service for machines without Nix
#     (`nix/systemd/regenerate` writes them; tests/nix fails when the committed files differ).
# Plain data and builtins only (no nixpkgs lib), so every consumer, and the tests, can import it anywhere.
rec {
  # TimeoutStopSec = the daemon's worst-case SIGTERM path (`shutdownSec` below) + this margin (waitress
  # closing, the interpreter exiting, a loaded machine). Only past it does systemd SIGKILL the whole cgroup.
  stopMarginSec = 5;

  daemons = {
    bash = rec {
      unit = "hive-bash";
      command = "hive-bash-daemon";
      envPrefix = "HIVE_BASH";
      description = "hive-bash-daemon: background shell tasks as MCP tools (run, status, send, kill, list)";
      # Every tool the daemon serves; the option description and the comments beside the units list these.
      # `list` is our extension to the seed's run/status/kill.
      tools = [ "run" "status" "send" "kill" "list" ];
      # Defaults of the daemon's own knobs (common/config.py, BashSettings); tests/nix checks they agree.
      port = 7711;
      maxRunning = 32;
      stateDirectory = "hive-bash";
      # The daemon's SIGTERM -> SIGKILL grace for a timed-out task (seconds), passed as HIVE_BASH_KILL_GRACE.
      killGrace = 2;
      # Worst case of its SIGTERM path (hivebash Engine.shutdown, cli): running tasks get SIGKILL at once,
      # then up to 10 s for their workers to record them `interrupted`, 0.5 s to sweep leftovers, 2 s to
      # flush todos.
      shutdownSec = 13;
    };
    subagent = rec {
      unit = "hive-subagent";
      command = "hive-subagent-daemon";
      envPrefix = "HIVE_SUBAGENT";
      description = "hive-subagent-daemon: nested claude sessions as MCP tools (start, continue, interrupt, status)";
      # Four tools, `status` included (it came after the first three and was once missing from the docs).
      tools = [ "start" "continue" "interrupt" "status" ];
      port = 7712;
      maxRunning = 4;
      stateDirectory = "hive-subagent";
      # A stop interrupts each running claude turn with SIGINT, then SIGKILL after this many seconds
      # (HIVE_SUBAGENT_KILL_GRACE).
      killGrace = 5;
      # Worst case of its SIGTERM path (hivesubagent Engine.shutdown, cli): up to 5 s for a turn still
      # starting, SIGINT and killGrace, SIGKILL and up to 5 s for the exit to be recorded, 5 s to flush todos.
      shutdownSec = 5 + killGrace + 5 + 5;
    };
  };

  # The environment both deployments give a daemon (the NixOS module adds what its options set).
  # `d.stateDirectory` is the StateDirectory= name: systemd creates /var/lib/<name> 0700 for the unit's user.
  environment = d: {
    "${d.envPrefix}_STATE_DIR" = "/var/lib/${d.stateDirectory}";
    "${d.envPrefix}_KILL_GRACE" = toString d.killGrace;
  };

  # The [Unit] settings both daemons share. With Restart=on-failure every 2 s and systemd's default limit
  # (5 starts in 10 s) a crash loop never hits the limit, since a start takes longer than the rest: it would
  # restart forever. Five starts a minute, then stop (`start-limit-hit`, see docs/operations.md): a transient
  # cause gets five tries, a lasting one stops filling the journal.
  unitConfig = {
    StartLimitIntervalSec = 60;
    StartLimitBurst = 5;
  };

  # The [Service] settings both daemons share; `d` is one of `daemons` above.
  serviceConfig = d: {
    # The daemon sends READY=1 over $NOTIFY_SOCKET once it listens: dependants start only when it serves.
    Type = "notify";
    Restart = "on-failure";
    RestartSec = 2;
    # `mixed`, not `control-group`: SIGTERM goes to the daemon alone, which stops its own work the way it
    # records it (bash tasks killed and recorded `interrupted`; claude turns SIGINT, then SIGKILL after
    # killGrace), within TimeoutStopSec. With `control-group` systemd would SIGTERM every task and claude at the same instant,
    # bypassing that escalation and racing the daemon's bookkeeping (a task that dies of systemd's SIGTERM
    # first is recorded `done`/SIGTERM instead of `interrupted`). The cgroup is still the backstop: whatever
    # is left once the daemon exits (a grandchild that called setsid) gets SIGKILL, and so does everything
    # when TimeoutStopSec runs out.
    KillMode = "mixed";
    TimeoutStopSec = d.shutdownSec + stopMarginSec;
    # Task outputs, records and the todo outbox: /var/lib/<stateDirectory>, private to the agent's user.
    StateDirectory = d.stateDirectory;
    StateDirectoryMode = "0700";
    UMask = "0077";
    # A kernel OOM kill of one task (a big build) must not stop the unit and, with it, every other task:
    # systemd's default OOMPolicy is `stop`.
    OOMPolicy = "continue";
    # Tasks are builds that fork and thread a lot (make -j, cargo, nix); the default TasksMax (15% of the
    # kernel's limit) is a cap the agent's own terminal does not have. The container's own limit still holds.
    TasksMax = "infinity";
    # The journal tags lines with this instead of the truncated process name of a wrapped script.
    SyslogIdentifier = d.unit;
    # Hardening. The daemons exist to run whatever the agent would type in a terminal (bash tasks, and
    # claude's own tools in a subagent), inside an agent container that is itself the isolation boundary.
    # So we refuse machine administration through the capability bounding set alone: no mount namespace,
    # no seccomp filter, no NoNewPrivileges, so the file system, devices, network and sudo stay exactly as
    # the agent's shell sees them. Dropped: loading kernel modules, rebooting, setting the clocks, process
    # accounting, audit configuration and MAC policy. Why each usual option is left off: `hardeningLeftOff`.
    CapabilityBoundingSet =
      "~CAP_SYS_MODULE CAP_SYS_BOOT CAP_SYS_TIME CAP_WAKE_ALARM CAP_SYS_PACCT CAP_AUDIT_CONTROL CAP_MAC_ADMIN CAP_MAC_OVERRIDE";
  };

  # Only when the daemon runs as root. For another user the kernel already refuses both (no CAP_SYS_ADMIN,
  # RLIMIT_RTPRIO 0), and systemd would imply NoNewPrivileges=yes for them, which breaks sudo in tasks.
  rootOnlyHardening = {
    # Own UTS namespace: a task cannot rename the container.
    ProtectHostname = true;
    # No SCHED_FIFO/SCHED_RR: a runaway task cannot starve the agent and the harness of CPU.
    RestrictRealtime = true;
  };

  # The hardening options deliberately not set, each with the reason. Rendered as comments into the plain
  # units and listed here for the NixOS module, so the reasons live in one place.
  hardeningLeftOff = [
    { option = "NoNewPrivileges"; why = "breaks sudo, su and every setuid helper a task may use"; }
    { option = "ProtectSystem, ProtectHome, ReadOnlyPaths"; why = "tasks install packages and write wherever the agent may (workspace, home, /etc)"; }
    { option = "PrivateTmp"; why = "the agent's own Read/Write tools and its tasks must share /tmp"; }
    { option = "PrivateDevices, DevicePolicy, ProtectClock"; why = "tasks use /dev/kvm, /dev/fuse, GPUs; ProtectClock implies DeviceAllow= and so a closed device policy (the clocks are guarded by the bounding set instead)"; }
    { option = "ProtectKernelTunables, ProtectKernelModules, ProtectKernelLogs, ProtectControlGroups, ProtectProc, ProcSubset"; why = "each gives the unit a private mount namespace: a mount a task makes (sshfs, fuse, bind) would be invisible to the agent's other processes; modules are refused by the bounding set; dmesg is how an agent learns a build was OOM-killed"; }
    { option = "PrivateNetwork, RestrictAddressFamilies, IPAddressDeny"; why = "tasks fetch dependencies, run servers, use netlink (ip) and packet sockets (tcpdump)"; }
    { option = "RestrictNamespaces"; why = "the nix build sandbox, bwrap, podman and Chromium's sandbox (browser tests) create namespaces"; }
    { option = "SystemCallFilter, SystemCallArchitectures"; why = "arbitrary programs: strace and gdb (ptrace), mount in build sandboxes, 32-bit binaries"; }
    { option = "MemoryDenyWriteExecute"; why = "JIT engines: node (claude itself), the JVM, Python's ctypes trampolines"; }
    { option = "LockPersonality"; why = "gdb disables ASLR through personality(2); i686 builds switch to PER_LINUX32"; }
    { option = "RestrictSUIDSGID"; why = "setgid directories (chmod g+s) and builds that install setuid helpers"; }
    { option = "PrivateUsers, DynamicUser"; why = "tasks run as the agent's own user and must see and own its files as that user"; }
    { option = "RemoveIPC"; why = "for a non-root user it would delete IPC objects of the agent's other processes (a database it started) on every stop"; }
  ];
}
