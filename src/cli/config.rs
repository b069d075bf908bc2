//! `fabricsim config import`: a switch configuration as scenario keys.

use fabricsim::{errln, out};
use std::path::Path;

pub(crate) fn config_import(file: &Path, strict: bool) -> Result<(), String> {
    let import = fabricsim::config::import_file(file).map_err(|e| e.to_string())?;
    if strict {
        import.strict().map_err(|e| e.to_string())?;
    }
    out!("{}", import.to_toml());
    if !import.not_modelled.is_empty() {
        errln!(
            "{}: {} lines not modelled (listed at the end; --strict refuses them)",
            file.display(),
            import.not_modelled.len()
        );
    }
    Ok(())
}
