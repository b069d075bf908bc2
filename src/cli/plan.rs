//! `fabricsim plan`: the GPUs a model's parameters need.

use super::common::print_json_or;

pub(crate) fn plan(
    params: &str,
    bytes_per_param: Option<f64>,
    training: bool,
    gpu_memory: &str,
    usable: f64,
    gpus_per_server: u32,
    json: bool,
) -> Result<(), String> {
    use fabricsim::plan::{self, PlanInput};
    let params = plan::parse_params(params).ok_or_else(|| {
        format!("--params: got \"{params}\", expected a count such as 405e9 or 70B")
    })?;
    let gpu_memory = fabricsim::units::parse_bytes(gpu_memory)
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            format!("--gpu-memory: got \"{gpu_memory}\", expected a size such as 80GB")
        })?;
    let p = plan::plan(&PlanInput {
        params,
        bytes_per_param: bytes_per_param.unwrap_or(if training {
            plan::TRAINING_BYTES_PER_PARAM
        } else {
            2.0
        }),
        gpu_memory: gpu_memory as f64,
        usable,
        gpus_per_server,
    })?;
    print_json_or(json, &p, || p.render())
}
