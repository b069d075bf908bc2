//! `fabricsim sweep` and `fabricsim merge`: a grid of runs, here or on a
//! Slurm cluster, and its merged results.

use super::common::{interrupt_flag, parse_wall};
use crate::StopArgs;
use fabricsim::engine::parallel::mpi::Ranks;
use fabricsim::{errln, out, outln};
use std::path::Path;

/// Runs sweep point `id`, as one of several MPI ranks when asked; a rank
/// other than 0 leaves what went wrong to rank 0 to say.
pub(crate) fn point_as_asked(
    s: &fabricsim::sweep::Sweep,
    out: &Path,
    id: usize,
    limits: &fabricsim::sweep::PointLimits,
    mpi: bool,
) -> Result<fabricsim::sweep::Ran, String> {
    if !mpi {
        return fabricsim::sweep::run_one(s, out, id, limits, None);
    }
    let ranks = Ranks::start()?;
    let ran = fabricsim::sweep::run_one(s, out, id, limits, Some(&ranks));
    if ranks.rank() != 0 {
        return Ok(fabricsim::sweep::Ran::OtherRank);
    }
    ran
}

pub(crate) fn run_sweep(
    file: &Path,
    out: &Path,
    jobs: Option<usize>,
    (point, mpi): (Option<usize>, bool),
    (emit, submit): (Option<&str>, bool),
    quiet: bool,
    stop: &StopArgs,
) -> Result<(), String> {
    use fabricsim::sweep::{self, slurm, Sweep};
    let mut s = Sweep::load(file)?;
    let limits = sweep::PointLimits {
        max_events: stop.max_events,
        max_sim_time: stop.max_sim_time.clone(),
        max_wall: stop.max_wall.as_deref().map(parse_wall).transpose()?,
        interrupt: Some(interrupt_flag()?),
    };
    if let Some(t) = &stop.max_sim_time {
        s.extra.push(format!("simulation.max_sim_time={t:?}"));
    }
    if let Some(id) = point {
        let ran = point_as_asked(&s, out, id, &limits, mpi);
        return match ran? {
            sweep::Ran::AlreadyDone => {
                if !quiet {
                    outln!("point {id} was already done");
                }
                Ok(())
            }
            sweep::Ran::Done {
                wall_seconds,
                partial,
            } => {
                if !quiet {
                    let how = partial.map_or(String::new(), |why| {
                        format!(", partial ({})", sweep::limit_name(why))
                    });
                    outln!("point {id} done in {wall_seconds:.2} s{how}");
                }
                Ok(())
            }
            sweep::Ran::OtherRank => Ok(()),
            sweep::Ran::Interrupted | sweep::Ran::NotStarted => {
                errln!("point {id} interrupted: nothing of it was kept; run it again to redo it");
                std::process::exit(130);
            }
        };
    }
    match emit {
        None => {}
        Some("slurm") => {
            sweep::settle(&s, out)?;
            let e = slurm::emit(&s, file, out, &limits.args())?;
            for n in &e.notes {
                errln!("note: {n}");
            }
            if submit {
                let (array, merge) = slurm::submit(&e)?;
                outln!(
                    "submitted array job {array} ({} tasks) and merge job {merge}",
                    s.points_len()
                );
            } else {
                outln!(
                    "wrote {}, {} and {}; submit with: sh {}",
                    e.array.display(),
                    e.merge.display(),
                    e.submit.display(),
                    e.submit.display()
                );
            }
            return Ok(());
        }
        Some(other) => {
            return Err(format!(
                "--emit: got \"{other}\", expected \"slurm\" (for other schedulers, run each task as `fabricsim sweep FILE --out DIR --point INDEX`)"
            ))
        }
    }
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err("--jobs: got 0, expected at least 1".into());
    }
    let o = sweep::run_local(
        &s,
        out,
        &sweep::Local {
            jobs,
            quiet,
            limits,
        },
    )?;
    let merged = sweep::merge::merge(out)?;
    if !quiet {
        out!("{}", merged.table);
        let partial = if o.partial > 0 {
            format!(" ({} partial)", o.partial)
        } else {
            String::new()
        };
        outln!(
            "sweep     {} points: {} run now{partial}, {} done before, {} failed",
            o.points,
            o.ran,
            o.already_done,
            o.failures.len()
        );
        outln!(
            "outputs   {}, {} plots in {}",
            out.join("sweep.csv").display(),
            merged.plots,
            out.join("plots").display()
        );
    }
    if o.interrupted > 0 {
        errln!(
            "interrupted: {} points not finished and not kept; run the sweep again to resume",
            o.interrupted
        );
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::process::exit(130);
    }
    if o.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} points failed (the others are done; run the sweep again to retry them):\n{}",
            o.failures.len(),
            o.points,
            o.failures.join("\n")
        ))
    }
}

pub(crate) fn merge(dir: &Path, quiet: bool) -> Result<(), String> {
    let m = fabricsim::sweep::merge::merge(dir)?;
    if !quiet {
        out!("{}", m.table);
        outln!(
            "merged    {} points: {} done, {} partial, {} failed, {} missing; {} and {} plots in {}",
            m.points,
            m.done,
            m.partial,
            m.failed.len(),
            m.missing.len(),
            dir.join("sweep.csv").display(),
            m.plots,
            dir.join("plots").display()
        );
    }
    if m.failed.is_empty() && m.missing.is_empty() {
        return Ok(());
    }
    let mut why: Vec<String> = m.failed.clone();
    if !m.missing.is_empty() {
        why.push(format!("not run yet: {}", m.missing.join(", ")));
    }
    Err(format!(
        "{}: {} of {} points have no results:\n{}",
        dir.display(),
        m.failed.len() + m.missing.len(),
        m.points,
        why.join("\n")
    ))
}
