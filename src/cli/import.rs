//! `fabricsim import megatron`: Megatron-LM's arguments as scenario keys.

use fabricsim::out;
use fabricsim::scenario::megatron::{import, script_args, Flags};
use std::path::Path;

pub(crate) fn import_megatron(
    args: &[String],
    script: Option<&Path>,
    gpus: Option<u64>,
) -> Result<(), String> {
    let mut words = Vec::new();
    if let Some(file) = script {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        words = script_args(&text).map_err(|m| format!("{}: {m}", file.display()))?;
    }
    // One argument holding them all (quoted) is split as a shell would.
    for a in args {
        let more = shell_words::split(a).map_err(|e| format!("{e}: {a}"))?;
        words.extend(more);
    }
    if words.is_empty() {
        return Err("no arguments: give Megatron-LM's arguments or --script FILE".into());
    }
    let job = import(&Flags::parse(&words), gpus)?;
    out!("[[workload]]\nkind = \"model\"\n\n{}", job.to_toml());
    Ok(())
}
