//! Model-size planner: how much GPU memory a model's parameters take and
//! the fewest GPUs and servers that hold them.
//!
//! Memory is parameters times bytes per parameter: 2 for FP16/BF16
//! weights (serving), or, for mixed-precision training with Adam, 16
//! (BF16 weights and gradients, FP32 master weights and two FP32
//! optimizer moments). Only what the parameters need is counted; a
//! share of each GPU's memory can be kept back for activations and
//! buffers with `usable`.

use serde::Serialize;

pub mod memory;

#[derive(Clone, Copy, Debug)]
pub struct PlanInput {
    pub params: f64,
    pub bytes_per_param: f64,
    /// Bytes of memory per GPU.
    pub gpu_memory: f64,
    /// Share of each GPU's memory the parameters may take (0, 1].
    pub usable: f64,
    pub gpus_per_server: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Plan {
    pub params: f64,
    pub bytes_per_param: f64,
    pub memory_bytes: f64,
    pub gpu_memory_bytes: f64,
    pub usable: f64,
    /// Memory over usable memory per GPU, before rounding up.
    pub gpus_exact: f64,
    pub min_gpus: u64,
    pub gpus_per_server: u32,
    pub min_servers: u64,
}

/// Bytes per parameter when training with mixed precision and Adam.
pub const TRAINING_BYTES_PER_PARAM: f64 = 16.0;

/// Most GPUs a plan may call for.
pub const MAX_GPUS: f64 = 1e9;

pub fn plan(i: &PlanInput) -> Result<Plan, String> {
    let finite_pos = |x: f64| x.is_finite() && x > 0.0;
    if !finite_pos(i.params) || i.params > 1e16 {
        return Err(format!(
            "--params: got {}, expected a positive count up to 1e16",
            i.params
        ));
    }
    if !finite_pos(i.bytes_per_param) || i.bytes_per_param > 64.0 {
        return Err(format!(
            "--bytes-per-param: got {}, expected more than 0 and at most 64",
            i.bytes_per_param
        ));
    }
    if !finite_pos(i.gpu_memory) {
        return Err("--gpu-memory: expected a positive size such as 80GB".into());
    }
    if !(i.usable > 0.0 && i.usable <= 1.0) {
        return Err(format!(
            "--usable: got {}, expected a share above 0 and at most 1",
            i.usable
        ));
    }
    if i.gpus_per_server == 0 {
        return Err("--gpus-per-server: expected at least 1".into());
    }
    let memory = i.params * i.bytes_per_param;
    let exact = memory / (i.gpu_memory * i.usable);
    // More GPUs than any cluster holds is not a plan (and past 2^64 the
    // count would not even print right).
    if exact.is_nan() || exact > MAX_GPUS {
        return Err(format!(
            "the model needs {exact:.3e} GPUs; expected at most {MAX_GPUS:e}: check --usable (got {:e}) and --gpu-memory",
            i.usable
        ));
    }
    // A hair of tolerance so that exactly-fitting models need no extra GPU.
    let min_gpus = ((exact - 1e-9).ceil() as u64).max(1);
    Ok(Plan {
        params: i.params,
        bytes_per_param: i.bytes_per_param,
        memory_bytes: memory,
        gpu_memory_bytes: i.gpu_memory,
        usable: i.usable,
        gpus_exact: exact,
        min_gpus,
        gpus_per_server: i.gpus_per_server,
        min_servers: min_gpus.div_ceil(i.gpus_per_server as u64),
    })
}

/// Parses a parameter count: "405e9", "405000000000", "405B", "70b",
/// "8B", "1.5T", "350M".
pub fn parse_params(s: &str) -> Option<f64> {
    let t = s.trim();
    let (num, scale) = match t.char_indices().last()? {
        (i, 'B' | 'b') => (&t[..i], 1e9),
        (i, 'T' | 't') => (&t[..i], 1e12),
        (i, 'M' | 'm') => (&t[..i], 1e6),
        (i, 'K' | 'k') => (&t[..i], 1e3),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v * scale)
}

impl Plan {
    pub fn render(&self) -> String {
        let gb = |b: f64| format!("{:.0} GB", b / 1e9);
        let servers = if self.min_servers == 1 {
            "1 server".to_string()
        } else {
            format!("{} servers", self.min_servers)
        };
        format!(
            "model      {:.3e} parameters x {} B = {} of parameters\n\
             per GPU    {} ({:.0}% usable for parameters)\n\
             needs      {:.2} GPUs' worth: at least {} GPU{} ({} of {} GPUs)\n",
            self.params,
            self.bytes_per_param,
            gb(self.memory_bytes),
            gb(self.gpu_memory_bytes),
            self.usable * 100.0,
            self.gpus_exact,
            self.min_gpus,
            if self.min_gpus == 1 { "" } else { "s" },
            servers,
            self.gpus_per_server
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100(params: &str) -> Plan {
        plan(&PlanInput {
            params: parse_params(params).unwrap(),
            bytes_per_param: 2.0,
            gpu_memory: 80e9,
            usable: 1.0,
            gpus_per_server: 8,
        })
        .unwrap()
    }

    /// Seed 002's examples on 80 GB GPUs with 2 bytes per parameter: 8B
    /// needs 16 GB (one GPU), 70B 140 GB (at least two), 405B 810 GB
    /// (10.1 GPUs' worth: 11, which is "at least 10", over two 8-GPU
    /// servers).
    #[test]
    fn reproduces_the_seed_examples() {
        let p = h100("8B");
        assert_eq!((p.memory_bytes, p.min_gpus, p.min_servers), (16e9, 1, 1));
        let p = h100("70B");
        assert_eq!((p.memory_bytes, p.min_gpus, p.min_servers), (140e9, 2, 1));
        let p = h100("405e9");
        assert_eq!(p.memory_bytes, 810e9);
        assert!(p.min_gpus >= 10);
        assert_eq!((p.min_gpus, p.min_servers), (11, 2));
    }

    #[test]
    fn exact_fits_and_bad_input() {
        let p = plan(&PlanInput {
            params: 40e9,
            bytes_per_param: 2.0,
            gpu_memory: 80e9,
            usable: 1.0,
            gpus_per_server: 8,
        })
        .unwrap();
        assert_eq!(p.min_gpus, 1);
        assert!(plan(&PlanInput {
            params: -1.0,
            ..dummy()
        })
        .is_err());
        assert!(plan(&PlanInput {
            usable: 0.0,
            ..dummy()
        })
        .is_err());
        assert!(plan(&PlanInput {
            gpus_per_server: 0,
            ..dummy()
        })
        .is_err());
        assert_eq!(parse_params("1.5T"), Some(1.5e12));
        assert_eq!(parse_params("350M"), Some(350e6));
        assert_eq!(parse_params("x"), None);
        assert_eq!(parse_params("-3B"), None);
    }

    fn dummy() -> PlanInput {
        PlanInput {
            params: 1e9,
            bytes_per_param: 2.0,
            gpu_memory: 80e9,
            usable: 1.0,
            gpus_per_server: 8,
        }
    }
}
