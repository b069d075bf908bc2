//! The subcommands, one file each; `main.rs` parses the command line
//! and calls them.

pub(crate) mod common;
pub(crate) mod compare;
pub(crate) mod config;
pub(crate) mod import;
pub(crate) mod nccl;
pub(crate) mod plan;
pub(crate) mod run;
pub(crate) mod sweep;
pub(crate) mod topo;
pub(crate) mod validate;
