//! `uraid raidctl [-v] [--json] VERB CONFIG`: NetBSD raidctl's verbs on a RAIDframe set.
//!
//! NetBSD configures a set into the kernel (`raidctl -c CONF raid0`) and it stays configured
//! until `raidctl -u raid0`. uraid has no kernel to hold it: each command configures the set
//! its configuration file names (or the one found with `--scan DIR`, by `--serial N` when
//! there are several), does the verb, and unconfigures it. The labels it leaves are what
//! NetBSD's driver leaves after `raidctl -c CONF raid0; raidctl VERB raid0; raidctl -u raid0`
//! (`uraid_raidframe::raidctl_session`), except that a verb that changes nothing writes nothing
//! (NetBSD bumps every label's mod_counter at each open and close of the raid device; the
//! counter only orders the set's components against each other, and they all move together).
//!
//! Where raidctl names the configured device, uraid names it `raidN` with N the unit the labels
//! record (`last_unit`). Component names are the configuration file's, as written; relative
//! paths are taken from the file's folder.
//!
//! - `-s`, `-S`, `-p`, `-g`, `-G`: [`report`];
//! - `-m`, `-M`: [`parity_map`];
//! - `-C`, `-I`: [`create`] (new sets; `-I` on an existing set gives it a new serial number);
//! - `-i`, `-P`: [`rewrite`] (parity rewritten through the engine, with progress);
//! - `-f`, `-A`: [`settings`], written by [`session`];
//! - `-R`, `-F`: [`reconstruct`] (a column rebuilt through the array service, in place or onto
//!   a hot spare); `-B`: [`copyback`];
//! - `-a`, `-r`: [`spares`] (checked and reported: the spares are the file's);
//! - `-c`, `-u`: the set is configured (its labels checked as `raidctl -c` checks them) and
//!   unconfigured; nothing is written.

mod copyback;
mod create;
mod parity_map;
mod reconstruct;
mod report;
mod rewrite;
mod session;
mod settings;
mod spares;
mod target;

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use super::CliResult;

#[derive(Args)]
#[command(group(ArgGroup::new("verb").required(true).multiple(false)))]
pub struct RaidctlArgs {
    /// Status: components, spares, each optimal component's label, parity status, progress.
    #[arg(short = 's', group = "verb")]
    pub status: bool,
    /// Progress of reconstruction, parity rewrite and copyback.
    #[arg(short = 'S', group = "verb")]
    pub progress: bool,
    /// Parity status; exits non-zero if it is DIRTY.
    #[arg(short = 'p', group = "verb")]
    pub parity_status: bool,
    /// Rewrite the parity if it is not known clean.
    #[arg(short = 'P', group = "verb")]
    pub rewrite_if_dirty: bool,
    /// Rewrite all parity (or mirror copies), then record the set clean.
    #[arg(short = 'i', group = "verb")]
    pub rewrite_parity: bool,
    /// Initialise the labels with serial number SERIAL: on blank components a new set, as
    /// `raidctl -C CONF; -I SERIAL; -u` makes it; on a set, a new serial number.
    #[arg(short = 'I', value_name = "SERIAL", group = "verb", allow_negative_numbers = true)]
    pub initialize: Option<i32>,
    /// Print the label of COMPONENT (a name from the configuration file).
    #[arg(short = 'g', value_name = "COMPONENT", group = "verb")]
    pub get_label: Option<String>,
    /// Print the configuration as raidctl prints it.
    #[arg(short = 'G', group = "verb")]
    pub print_config: bool,
    /// Fail COMPONENT: the set runs without it from now on.
    #[arg(short = 'f', value_name = "COMPONENT", group = "verb")]
    pub fail: Option<String>,
    /// Fail COMPONENT (if it is not failed already) and reconstruct its column onto the
    /// configuration file's first free hot spare, which takes the column.
    #[arg(short = 'F', value_name = "COMPONENT", group = "verb")]
    pub fail_to_spare: Option<String>,
    /// Reconstruct COMPONENT's column in place, onto it (the failed component, or the one that
    /// replaced it); a live component is failed first.
    #[arg(short = 'R', value_name = "COMPONENT", group = "verb")]
    pub reconstruct: Option<String>,
    /// Copy the column a hot spare serves back to the column's own component.
    #[arg(short = 'B', group = "verb")]
    pub copyback: bool,
    /// Check COMPONENT as a new hot spare, and say how to add it (spares are the
    /// configuration file's START spare section); writes nothing.
    #[arg(short = 'a', value_name = "COMPONENT", group = "verb")]
    pub add_spare: Option<String>,
    /// Check that hot spare COMPONENT can be removed, and say how (from the configuration
    /// file's START spare section); writes nothing.
    #[arg(short = 'r', value_name = "COMPONENT", group = "verb")]
    pub remove_spare: Option<String>,
    /// Autoconfiguration at boot: yes, no, forceroot (or root) or softroot.
    #[arg(short = 'A', value_name = "yes|no|forceroot|softroot", group = "verb")]
    pub autoconfig: Option<String>,
    /// Use the parity map (yes) or not (no) from the next configuration on.
    #[arg(short = 'M', value_name = "yes|no", group = "verb")]
    pub parity_map: Option<String>,
    /// Parity map status.
    #[arg(short = 'm', group = "verb")]
    pub map_status: bool,
    /// Configure the set (its labels checked as `raidctl -c` checks them), then unconfigure
    /// it; writes nothing.
    #[arg(short = 'c', group = "verb")]
    pub configure: bool,
    /// Force-configure: on blank components, label a new set (serial number 0) as
    /// `raidctl -C CONF; -u` does.
    #[arg(short = 'C', group = "verb")]
    pub force_configure: bool,
    /// Unconfigure: every command unconfigures the set at its end, so this only checks that
    /// the set configures; writes nothing.
    #[arg(short = 'u', group = "verb")]
    pub unconfigure: bool,
    /// Verbose, as raidctl's -v: a parity rewrite or reconstruction says how far it has come.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Print JSON (-s, -p, -m, -g).
    #[arg(long)]
    pub json: bool,
    /// Find the set's components under DIR (by their labels) instead of a configuration file.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub scan: Option<PathBuf>,
    /// With --scan: the set, by serial number (needed when DIR holds several).
    #[arg(long, value_name = "N", requires = "scan")]
    pub serial: Option<u32>,
    /// The set's raidctl configuration file.
    #[arg(required_unless_present = "scan")]
    pub config: Option<PathBuf>,
}

pub fn run(args: &RaidctlArgs) -> CliResult {
    let target = target::Target::from_args(args)?;
    if args.json && !(args.status || args.parity_status || args.map_status || args.get_label.is_some()) {
        return super::err("--json goes with -s, -p, -m or -g");
    }
    if args.force_configure || args.initialize.is_some() {
        return create::run(&target, args.initialize);
    }
    if args.status {
        return report::status(&target, args.json);
    }
    if args.progress {
        return report::progress(&target);
    }
    if args.parity_status {
        return report::parity(&target, args.json);
    }
    if let Some(component) = &args.get_label {
        return report::label(&target, component, args.json);
    }
    if args.print_config {
        return report::config(&target);
    }
    if args.map_status {
        return parity_map::status(&target, args.json);
    }
    if let Some(word) = &args.parity_map {
        return parity_map::set(&target, word);
    }
    if args.rewrite_parity || args.rewrite_if_dirty {
        return rewrite::run(&target, args.rewrite_if_dirty, args.verbose);
    }
    if let Some(component) = &args.fail {
        return settings::fail(&target, component);
    }
    if let Some(component) = &args.reconstruct {
        return reconstruct::in_place(&target, component, args.verbose);
    }
    if let Some(component) = &args.fail_to_spare {
        return reconstruct::to_spare(&target, component, args.verbose);
    }
    if args.copyback {
        return copyback::run(&target);
    }
    if let Some(component) = &args.add_spare {
        return spares::add(&target, component);
    }
    if let Some(component) = &args.remove_spare {
        return spares::remove(&target, component);
    }
    if let Some(word) = &args.autoconfig {
        return settings::autoconfig(&target, word);
    }
    // -c or -u: configuring is the check.
    target.open(false).map(|_| ())
}
