//! Finding an agent's process: how an agent's CLI shows up in the process
//! table (its executable's names, its npm package) and the nearest
//! ancestor of a hook or command that is that agent. Each agent module
//! names its own [`AgentProgram`]; the process table is read through the
//! platform layer (`wakeful_platform::tree`).

/// How an agent's CLI shows up as a process.
pub struct AgentProgram {
    /// Names of its executable or script (`claude`, `claude.exe`).
    pub names: &'static [&'static str],
    /// Its npm package's folder, as found in a script's path
    /// (`/@anthropic-ai/claude-code/`).
    pub package: &'static str,
}

/// Whether a process is the agent `program`, from the target of its
/// `/proc/<pid>/exe` (when readable) and its command line: the native
/// binary (named one of `program.names`, whatever its folder), or Node.js
/// or Bun running the npm package's script (the runtime's own options, such
/// as `--max-old-space-size=N`, may come before it).
pub fn is_agent<S: AsRef<str>>(program: &AgentProgram, exe: Option<&str>, argv: &[S]) -> bool {
    fn base(path: &str) -> &str {
        // An executable replaced on disk (an update) reads "… (deleted)".
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        path.rsplit('/').next().unwrap_or(path)
    }
    let named = |path: &str| program.names.contains(&base(path));
    let argv0 = argv.first().map(AsRef::as_ref);
    if exe.is_some_and(named) || argv0.is_some_and(named) {
        return true;
    }
    let runtime = [exe, argv0]
        .into_iter()
        .flatten()
        .any(|p| matches!(base(p), "node" | "nodejs" | "bun"));
    runtime
        && argv
            .iter()
            .skip(1)
            .map(AsRef::as_ref)
            .find(|a| !a.starts_with('-'))
            .is_some_and(|script| named(script) || script.contains(program.package))
}

/// A process's arguments; `None` when they cannot be read or there are
/// none (a zombie, a kernel thread).
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let argv = wakeful_platform::tree::cmdline(i32::try_from(pid).ok()?)?;
    (!argv.is_empty()).then_some(argv)
}

/// The nearest ancestor of this process that is the agent `program`, with
/// its arguments.
pub fn nearest_ancestor(program: &AgentProgram) -> Option<(u32, Vec<String>)> {
    let mut pid = std::os::unix::process::parent_id();
    // Hooks run as the agent's child or grandchild (`sh -c …`), shell tool
    // commands a few levels further down; the bound only guards against a
    // loop.
    for _ in 0..64 {
        if pid <= 1 {
            return None;
        }
        let exe = i32::try_from(pid)
            .ok()
            .and_then(wakeful_platform::tree::exe);
        if let Some(argv) = cmdline(pid) {
            let exe = exe.as_ref().map(|p| p.to_string_lossy());
            if is_agent(program, exe.as_deref(), &argv) {
                return Some((pid, argv));
            }
        }
        let info = wakeful_platform::tree::proc_info(i32::try_from(pid).ok()?)?;
        pid = u32::try_from(info.ppid).ok()?;
    }
    None
}
