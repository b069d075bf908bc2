//! Slurm: a sweep as an array job, one task per point, and a merge job
//! that runs once every task has succeeded.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::{write_atomic, Sweep};

/// `[slurm]` in a sweep file.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSlurm {
    job_name: Option<String>,
    partition: Option<String>,
    account: Option<String>,
    qos: Option<String>,
    time: Option<String>,
    cpus_per_task: Option<i64>,
    ranks: Option<i64>,
    mem: Option<String>,
    limit: Option<i64>,
    extra: Option<Vec<String>>,
    binary: Option<String>,
}

/// Resources and options of the array job.
#[derive(Clone, Debug, PartialEq)]
pub struct Slurm {
    pub job_name: String,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// Wall-time limit per task, as sbatch takes it (`30`, `1:00:00`).
    pub time: Option<String>,
    pub cpus_per_task: u32,
    /// MPI ranks per point (`--ntasks`): above 1, each point runs under
    /// `srun` with `--mpi`, cut over that many ranks.
    pub ranks: u32,
    /// Memory per task, as sbatch takes it (`4G`).
    pub mem: Option<String>,
    /// Most tasks running at once (`%limit` of `--array`).
    pub limit: Option<u32>,
    /// More `#SBATCH` options, each as on the command line.
    pub extra: Vec<String>,
    /// The fabricsim binary the tasks run; default: this one.
    pub binary: Option<String>,
}

/// Characters that cannot go into an `#SBATCH` line unquoted.
fn plain_option(key: &str, v: &str) -> Result<String, (String, String)> {
    if v.is_empty()
        || v.chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '#' || c == '\'')
    {
        return Err((
            format!("slurm.{key}"),
            format!("got \"{v}\", expected a value without spaces, quotes or #"),
        ));
    }
    Ok(v.to_string())
}

impl Slurm {
    pub fn from_raw(raw: Option<&RawSlurm>) -> Result<Slurm, (String, String)> {
        let d = RawSlurm::default();
        let r = raw.unwrap_or(&d);
        let opt =
            |k: &str, v: &Option<String>| v.as_deref().map(|v| plain_option(k, v)).transpose();
        let positive = |k: &str, v: Option<i64>| -> Result<Option<u32>, (String, String)> {
            match v {
                None => Ok(None),
                Some(n) if (1..=1_000_000).contains(&n) => Ok(Some(n as u32)),
                Some(n) => Err((
                    format!("slurm.{k}"),
                    format!("got {n}, expected a positive integer"),
                )),
            }
        };
        let mut extra = Vec::new();
        for (i, e) in r.extra.iter().flatten().enumerate() {
            if !e.starts_with('-') || e.chars().any(char::is_control) {
                return Err((
                    format!("slurm.extra[{i}]"),
                    format!("got \"{e}\", expected an sbatch option such as \"--constraint=x86\""),
                ));
            }
            extra.push(e.clone());
        }
        Ok(Slurm {
            job_name: opt("job_name", &r.job_name)?.unwrap_or_else(|| "fabricsim-sweep".into()),
            partition: opt("partition", &r.partition)?,
            account: opt("account", &r.account)?,
            qos: opt("qos", &r.qos)?,
            time: opt("time", &r.time)?,
            cpus_per_task: positive("cpus_per_task", r.cpus_per_task)?.unwrap_or(1),
            ranks: match r.ranks {
                Some(n) if !(1..=i64::from(crate::scenario::MAX_THREADS)).contains(&n) => {
                    return Err((
                        "slurm.ranks".into(),
                        format!(
                            "got {n}, expected 1 to {} MPI ranks per point",
                            crate::scenario::MAX_THREADS
                        ),
                    ))
                }
                n => n.map_or(1, |n| n as u32),
            },
            mem: opt("mem", &r.mem)?,
            limit: positive("limit", r.limit)?,
            extra,
            binary: match &r.binary {
                Some(b) if b.chars().any(char::is_control) => {
                    return Err((
                        "slurm.binary".into(),
                        format!("got {b:?}, expected a path without control characters"),
                    ))
                }
                b => b.clone(),
            },
        })
    }
}

/// A string as one shell word.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A path that goes into a generated script, as text: a control
/// character (a newline ends a comment or an `#SBATCH` line and starts a
/// command) is refused, whatever quoting follows.
fn script_path(p: &Path, what: &str) -> Result<String, String> {
    let s = p.to_str().ok_or_else(|| {
        format!(
            "{what} {}: not UTF-8; expected a plain path for the Slurm scripts",
            p.display()
        )
    })?;
    if s.chars().any(char::is_control) {
        return Err(format!(
            "{what} {s:?} holds a control character (such as a newline); it cannot go into a Slurm script"
        ));
    }
    Ok(s.to_string())
}

/// A value of an `#SBATCH` line: sbatch reads these lines itself, not
/// the shell, and takes a double-quoted value whole, so a value with a
/// space is double-quoted; one with a double quote or a backslash has no
/// safe spelling there and is refused.
fn sbatch_value(s: &str, what: &str) -> Result<String, String> {
    if s.contains('"') || s.contains('\\') {
        return Err(format!(
            "{what} {s:?} holds a double quote or a backslash, which an #SBATCH line cannot carry; choose another folder"
        ));
    }
    if s.chars()
        .any(|c| c.is_whitespace() || c == '#' || c == '\'')
    {
        Ok(format!("\"{s}\""))
    } else {
        Ok(s.to_string())
    }
}

/// The files `--emit slurm` writes, in `OUT/slurm/`.
pub struct Emitted {
    pub array: PathBuf,
    pub merge: PathBuf,
    pub submit: PathBuf,
    /// What the user should know before submitting (a grid past Slurm's
    /// default array size).
    pub notes: Vec<String>,
}

/// Slurm's default `MaxArraySize` (Slurm's job array guide,
/// slurm.schedmd.com/job_array.html: "The default value of MaxArraySize
/// is 1001"): an array's task indices must stay below it.
pub const DEFAULT_MAX_ARRAY_SIZE: usize = 1001;

fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: cannot resolve: {e}", p.display()))
}

/// Writes the array job, the merge job and a script that submits both.
/// `sweep_file` and `out` become absolute paths: the tasks may start
/// elsewhere. `args` go on each task's command line (the limits).
pub fn emit(
    sweep: &Sweep,
    sweep_file: &Path,
    out: &Path,
    args: &[String],
) -> Result<Emitted, String> {
    let n = sweep.points_len();
    if n == 0 {
        return Err("the sweep has no points: nothing to submit".into());
    }
    let mut notes = Vec::new();
    if n > DEFAULT_MAX_ARRAY_SIZE {
        notes.push(format!(
            "the array has {n} tasks (indices 0 to {}); Slurm refuses indices of {DEFAULT_MAX_ARRAY_SIZE} or more unless MaxArraySize in slurm.conf is above {}: check `scontrol show config | grep MaxArraySize`, or split the sweep",
            n - 1,
            n - 1
        ));
    }
    let s = &sweep.slurm;
    let exe = match &s.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find the fabricsim binary: {e}"))?
            .display()
            .to_string(),
    };
    let sweep_file = absolute(sweep_file)?;
    let out = absolute(out)?;
    // Every path checked before anything is written.
    script_path(&sweep_file, "the sweep file")?;
    script_path(&out, "the output folder")?;
    script_path(Path::new(&exe), "the fabricsim binary")?;
    if let Some(a) = args.iter().find(|a| a.chars().any(char::is_control)) {
        return Err(format!(
            "the option {a:?} holds a control character; it cannot go into a Slurm script"
        ));
    }
    let dir = out.join("slurm");
    let logs = dir.join("logs");
    let log_value = |log: &str| {
        sbatch_value(
            &script_path(&logs.join(log), "the log path")?,
            "the log path",
        )
    };
    let array_log = log_value("point-%a.out")?;
    let merge_log = log_value("merge.out")?;
    fs::create_dir_all(&logs).map_err(|e| format!("{}: cannot create: {e}", logs.display()))?;
    let q = |p: &Path| shell_quote(&p.display().to_string());

    let header = |name: &str, log: &str| {
        let mut h = String::from("#!/bin/bash\n");
        let _ = writeln!(h, "#SBATCH --job-name={name}");
        let _ = writeln!(h, "#SBATCH --output={log}");
        let _ = writeln!(h, "#SBATCH --cpus-per-task={}", s.cpus_per_task);
        for (k, v) in [
            ("partition", &s.partition),
            ("account", &s.account),
            ("qos", &s.qos),
            ("time", &s.time),
            ("mem", &s.mem),
        ] {
            if let Some(v) = v {
                let _ = writeln!(h, "#SBATCH --{k}={v}");
            }
        }
        for e in &s.extra {
            let _ = writeln!(h, "#SBATCH {e}");
        }
        h
    };

    let mut array = header(&s.job_name, &array_log);
    let limit = s.limit.map_or(String::new(), |l| format!("%{l}"));
    let _ = writeln!(array, "#SBATCH --array=0-{}{limit}", n - 1);
    // Several ranks per point: srun starts them, each a partition.
    let (launch, mpi) = if s.ranks > 1 {
        let _ = writeln!(array, "#SBATCH --ntasks={}", s.ranks);
        ("srun ", " --mpi")
    } else {
        ("", "")
    };
    let _ = write!(
        array,
        "# {n} points of {}: one task each; a finished point is skipped when\n\
         # the task runs again.\n\
         set -euo pipefail\n\
         exec {launch}{} sweep {} --out {} --point \"$SLURM_ARRAY_TASK_ID\"{mpi}{}\n",
        q(&sweep_file),
        shell_quote(&exe),
        q(&sweep_file),
        q(&out),
        args.iter()
            .map(|a| format!(" {}", shell_quote(a)))
            .collect::<String>()
    );
    let mut merge = header(&format!("{}-merge", s.job_name), &merge_log);
    let _ = write!(
        merge,
        "# Gathers every point into sweep.csv and plots/ once all tasks have\n\
         # succeeded (submitted with --dependency=afterok on the array).\n\
         set -euo pipefail\n\
         exec {} merge {}\n",
        shell_quote(&exe),
        q(&out)
    );
    let array_path = dir.join("array.sbatch");
    let merge_path = dir.join("merge.sbatch");
    let submit = format!(
        "#!/bin/bash\n\
         # Submits the sweep's array job, then its merge job to run after it.\n\
         set -euo pipefail\n\
         array=$(sbatch --parsable {})\n\
         array=${{array%%;*}}\n\
         merge=$(sbatch --parsable --dependency=afterok:\"$array\" {})\n\
         echo \"array job $array, merge job ${{merge%%;*}}\"\n",
        q(&array_path),
        q(&merge_path)
    );
    let submit_path = dir.join("submit.sh");
    write_atomic(&array_path, array.as_bytes())?;
    write_atomic(&merge_path, merge.as_bytes())?;
    write_atomic(&submit_path, submit.as_bytes())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for p in [&array_path, &merge_path, &submit_path] {
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
        }
    }
    Ok(Emitted {
        array: array_path,
        merge: merge_path,
        submit: submit_path,
        notes,
    })
}

/// The job id in `sbatch --parsable` output (`ID` or `ID;CLUSTER`).
pub fn parse_job_id(out: &str) -> Option<u64> {
    out.trim().split(';').next()?.trim().parse().ok()
}

fn sbatch(args: &[String]) -> Result<u64, String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .output()
        .map_err(|e| {
            format!("cannot run sbatch: {e} (is Slurm's client installed and on PATH?)")
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "sbatch {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse_job_id(&stdout).ok_or_else(|| format!("sbatch printed no job id: \"{}\"", stdout.trim()))
}

/// Submits the emitted jobs: the array, then the merge after it.
pub fn submit(e: &Emitted) -> Result<(u64, u64), String> {
    let array = sbatch(&[e.array.display().to_string()])?;
    let merge = sbatch(&[
        format!("--dependency=afterok:{array}"),
        e.merge.display().to_string(),
    ])?;
    Ok((array, merge))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_they_must_be() {
        assert_eq!(shell_quote("/opt/fabricsim"), "/opt/fabricsim");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn job_ids_come_with_or_without_a_cluster() {
        assert_eq!(parse_job_id("42\n"), Some(42));
        assert_eq!(parse_job_id("42;cluster\n"), Some(42));
        assert_eq!(parse_job_id("Submitted"), None);
    }

    #[test]
    fn options_with_spaces_are_refused() {
        let raw = RawSlurm {
            partition: Some("gpu nodes".into()),
            ..Default::default()
        };
        let e = Slurm::from_raw(Some(&raw)).unwrap_err();
        assert_eq!(e.0, "slurm.partition");
        let raw = RawSlurm {
            limit: Some(0),
            ..Default::default()
        };
        assert_eq!(Slurm::from_raw(Some(&raw)).unwrap_err().0, "slurm.limit");
    }
}
