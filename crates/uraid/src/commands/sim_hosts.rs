//! `uraid sim hosts`: arrays over many hosts on paper (the performance model's `hosts`
//! module): for each host count and placement, how long rebuilding a lost host takes, how much
//! of it passes through the one host that runs an md array over NBD members, and the chance of
//! data loss per host failure and per year (`docs/many-hosts.md`).

use clap::Args;
use uraid_perf_model::hosts::{self, Hosts, Row};

use super::{emit, err, CliResult};

#[derive(Args)]
pub struct HostsArgs {
    /// Host counts, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [4u32, 8, 16, 32, 64, 128])]
    pub hosts: Vec<u32>,
    /// Stripe width of the raid6 groups and of the declustered stripes (hosts per stripe).
    #[arg(long, default_value_t = 8)]
    pub width: u32,
    /// Array data per host (K, M, G, T suffixes).
    #[arg(long, default_value = "10T")]
    pub capacity: String,
    /// Network bandwidth per host, each way, in Gbit/s.
    #[arg(long, default_value_t = 10.0)]
    pub net_gbit: f64,
    /// Disk bandwidth per host, reads and writes together, per second (K, M, G suffixes).
    #[arg(long, default_value = "1G")]
    pub disk: String,
    /// A host's mean time to failure, hours (a host lost with what it holds).
    #[arg(long, default_value_t = 50_000.0)]
    pub mttf_hours: f64,
    /// One JSON object per row instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &HostsArgs) -> CliResult {
    let size = |flag: &str, text: &str| -> CliResult<f64> {
        match crate::size::parse_size(text, 1) {
            Ok(0) => err(format!("--{flag}={text}: must be more than 0")),
            Ok(n) => Ok(n as f64),
            Err(e) => err(format!("--{flag}={text}: {e}")),
        }
    };
    let capacity = size("capacity", &args.capacity)?;
    let disk = size("disk", &args.disk)?;
    if args.width < 4 {
        return err(format!("--width={}: a raid6 stripe needs at least 4 hosts", args.width));
    }
    for (flag, value) in [("net-gbit", args.net_gbit), ("mttf-hours", args.mttf_hours)] {
        if !(value > 0.0 && value.is_finite()) {
            return err(format!("--{flag}={value}: must be a number more than 0"));
        }
    }
    let base = Hosts {
        count: 0,
        capacity_bytes: capacity,
        net_bytes_per_s: args.net_gbit * 1e9 / 8.0,
        disk_bytes_per_s: disk,
        mttf_hours: args.mttf_hours,
    };
    let rows = hosts::table(&base, &args.hosts, args.width);
    if rows.is_empty() {
        return err(format!(
            "--hosts={}: no placement fits these host counts (md raid10 needs an even count, md raid6 4 or more, \
             raid6 groups a multiple of --width={w}, declustered raid6 more than {w})",
            args.hosts.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            w = args.width
        ));
    }
    let text = if args.json { json(&rows)? } else { table(&rows) };
    emit(&text)
}

fn json(rows: &[Row]) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for r in rows {
        let line = serde_json::json!({
            "hosts": r.hosts,
            "placement": r.placement.name(),
            "rebuild_hours": r.exposure.rebuild_hours,
            "head_bytes_in": r.exposure.head_bytes_in,
            "loss_given_failure": r.exposure.loss_given_failure,
            "loss_per_year": r.exposure.loss_per_year,
        });
        out.push_str(&serde_json::to_string(&line)?);
        out.push('\n');
    }
    Ok(out)
}

fn table(rows: &[Row]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>5}  {:<36} {:>13} {:>14} {:>18} {:>14}",
        "hosts", "placement", "rebuild (h)", "via head (TiB)", "P(loss | failure)", "P(loss) / year"
    );
    for r in rows {
        let e = &r.exposure;
        let _ = writeln!(
            out,
            "{:>5}  {:<36} {:>13.2} {:>14.0} {:>18.2e} {:>14.2e}",
            r.hosts,
            r.placement.name(),
            e.rebuild_hours,
            e.head_bytes_in / (1u64 << 40) as f64,
            e.loss_given_failure,
            e.loss_per_year
        );
    }
    out
}
