//! Which components of a RAIDframe set serve, from their labels, as NetBSD decides it: at
//! autoconfiguration (components found by scanning, grouped by `rf_does_it_fit`, the freshest
//! members of the set by mod_counter) or at `raidctl -c` (the components a configuration file names,
//! checked against each other by `rf_CheckLabels`). Pure over labels already read.
//!
//! A column serves when its component is fresh; a component that is present but stale (an
//! older mod_counter), a maverick (another serial number) or a duplicate is left out and never
//! written, and its column runs degraded. A set NetBSD would refuse is refused, and so is one
//! whose configuration file disagrees with its labels on the geometry (the kernel would take
//! the file's word and read the data wrong; uraid does not guess which is right).
//!
//! Whether parity can be trusted comes from the labels' clean flags and, when the parity map
//! is in use, from the regions it marks dirty (`rf_paritymap_attach`).

use thiserror::Error;
use uraid_raidframe_format::config_file::{RaidConfig, ABSENT};
use uraid_raidframe_format::configure_check::{check_labels, ConfigureCheck, Refusal};
use uraid_raidframe_format::freshness::{assess_set, group_sets, ColumnState};
use uraid_raidframe_format::label::{ComponentLabel, PMLABEL_DISABLE, PMLABEL_VALID, PMLABEL_WASUSED};
use uraid_raidframe_format::layout::{default_region_count, parity_map_verdict, ParityMap, ParityMapVerdict};
use uraid_raidframe_format::mapping::{Geometry, Level, MappingError};

use crate::set_layout::{SetLayout, SetLayoutError};

/// Why a set cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SetPlanError {
    #[error("no RAIDframe component labels among the devices given")]
    NoComponents,
    #[error("{} RAIDframe sets found (serial numbers {}); choose one with --serial", .serials.len(), list(.serials))]
    SeveralSets { serials: Vec<i32> },
    #[error(
        "{sets} RAIDframe sets share serial number {serial} (their geometry or settings differ); give the components of one of them"
    )]
    SameSerial { serial: i32, sets: usize },
    #[error("no RAIDframe set with serial number {serial} (found {})", list(.found))]
    NoSuchSerial { serial: i32, found: Vec<i32> },
    #[error("RAIDframe set {serial}: its label says RAID level {level:?}, which uraid does not run (RAID 0, 1, 4 and 5 only)")]
    UnsupportedLevel { serial: i32, level: char },
    #[error("RAIDframe set {serial}: {source}")]
    Geometry { serial: i32, source: MappingError },
    #[error("RAIDframe set {serial}: {source}")]
    Layout { serial: i32, source: SetLayoutError },
    #[error(
        "RAIDframe set {serial} (RAID {level}) cannot run: column(s) {} have no fresh component{}{}",
        list(.missing),
        if *.level == '1' { " (a whole mirrored pair is gone)" } else { "" },
        .stale.iter().map(|(c, m, set)| format!("; column {c} is stale (mod_counter {m}, the set's is {set})")).collect::<String>()
    )]
    NotEnoughComponents {
        serial: i32,
        level: char,
        missing: Vec<usize>,
        /// Stale components of the missing columns: `(column, mod_counter, the set's)`.
        stale: Vec<(usize, i32, i32)>,
    },
    #[error("raidctl -c would refuse these components: {}", refusal_text(.0))]
    Refused(Refusal),
    #[error(
        "the configuration file says {field} {file}, but the label of column {column} says {label}; refusing to run the set with either (fix the file, or the labels with raidctl)"
    )]
    FileDisagrees { column: usize, field: &'static str, file: String, label: String },
    #[error("the configuration file lists {listed} components for {columns} columns")]
    ColumnCount { listed: usize, columns: i32 },
    #[error("the fresh components disagree on their size (numBlocks {a} and {b})")]
    SizesDisagree { a: u64, b: u64 },
}

fn list<T: ToString>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

fn refusal_text(r: &Refusal) -> String {
    match r {
        Refusal::TooManySerials => "more than two different serial numbers".into(),
        Refusal::TooManyModCounters => "more than two different mod_counters".into(),
        Refusal::NoSingleMaverick => {
            "their serial numbers or mod_counters disagree, and not on a single component".into()
        }
        Refusal::Raid0Disagreement => "a RAID 0 set whose labels disagree".into(),
        Refusal::Misplaced { column, field } => format!("the label of column {column} has the wrong {field}"),
    }
}

/// A component as read from its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadComponent {
    pub label: ComponentLabel,
    /// Its parity map, or `None` when the area does not read as one.
    pub parity_map: Option<ParityMap>,
}

/// What one column starts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnStart {
    /// Served by component `index` (into the components given).
    Fresh(usize),
    /// No component for it: none found, `absent` in the file, or one left out.
    Missing,
}

/// Why a component given is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftOut {
    /// Its mod_counter is behind the set's: it missed updates (it failed, or was away).
    Stale { column: usize, mod_counter: i32, set_mod_counter: i32 },
    /// `raidctl -c` fails it: another serial number, or the one disagreeing mod_counter.
    Maverick { column: usize },
    /// Another fresh component already holds its column.
    Duplicate { column: usize },
    /// Its label belongs to another set.
    OtherSet { serial: i32 },
}

/// What is known about the parity map of a set with redundancy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapStart {
    /// RAID 0: no map.
    NoParity,
    /// A label asks for none (`raidctl -M no`): parity is tracked by the clean flags alone.
    Disabled,
    /// The map is used. `on_disk` is the fresh components' maps merged, when the kernel would
    /// trust them (`None`: untrusted or unreadable, to be written before it is relied on).
    InUse { on_disk: Option<Box<ParityMap>>, regions: u32, tickms: u32, ntick: u32 },
}

/// A set ready to run: its layout, which component serves each column, and whether its parity
/// (or mirror copies) can be trusted.
#[derive(Debug, Clone)]
pub struct SetPlan {
    pub layout: SetLayout,
    pub serial_number: i32,
    /// The set's mod_counter: the fresh components'.
    pub mod_counter: i32,
    pub columns: Vec<ColumnStart>,
    /// Components given but not used, by index, with why.
    pub left_out: Vec<(usize, LeftOut)>,
    /// Every fresh label says clean.
    pub labels_clean: bool,
    pub parity_map: MapStart,
}

impl SetPlan {
    /// The set found among `components` by autoconfiguration: the one with serial number
    /// `serial` if given, else the only one. Its freshest members (by mod_counter) serve.
    pub fn autoconfigure(components: &[ReadComponent], serial: Option<i32>) -> Result<SetPlan, SetPlanError> {
        let labels: Vec<ComponentLabel> = components.iter().map(|c| c.label.clone()).collect();
        let groups = group_sets(&labels);
        if groups.is_empty() {
            return Err(SetPlanError::NoComponents);
        }
        let mut serials: Vec<i32> = groups.iter().map(|g| labels[g[0]].serial_number).collect();
        serials.sort_unstable();
        serials.dedup();
        let want = match serial {
            Some(s) if serials.contains(&s) => s,
            Some(s) => return Err(SetPlanError::NoSuchSerial { serial: s, found: serials }),
            None if serials.iter().all(|&s| s == serials[0]) => serials[0],
            None => return Err(SetPlanError::SeveralSets { serials }),
        };
        // Components of one set that differ in anything but mod_counter, clean and status
        // (`rf_does_it_fit`) make two sets for the kernel, which would configure both; which
        // one holds the data is not for uraid to guess.
        let matching: Vec<&Vec<usize>> = groups.iter().filter(|g| labels[g[0]].serial_number == want).collect();
        let [chosen] = matching.as_slice() else {
            return Err(SetPlanError::SameSerial { serial: want, sets: matching.len() });
        };
        let assessment = assess_set(&labels, chosen.as_slice()).expect("grouped labels are candidates");
        let first = &labels[chosen[0]];
        let level = level_of(first)?;
        let columns: Vec<ColumnStart> = assessment
            .columns
            .iter()
            .map(|c| match c {
                ColumnState::Fresh(i) => ColumnStart::Fresh(*i),
                ColumnState::Missing => ColumnStart::Missing,
            })
            .collect();
        let mut left_out: Vec<(usize, LeftOut)> = Vec::new();
        for (i, label) in labels.iter().enumerate() {
            let column = label.column as usize;
            if !chosen.contains(&i) {
                if label.check_reasonable(None).is_ok() {
                    left_out.push((i, LeftOut::OtherSet { serial: label.serial_number }));
                }
            } else if label.mod_counter != assessment.mod_counter {
                left_out.push((
                    i,
                    LeftOut::Stale { column, mod_counter: label.mod_counter, set_mod_counter: assessment.mod_counter },
                ));
            } else if columns.get(column) != Some(&ColumnStart::Fresh(i)) {
                left_out.push((i, LeftOut::Duplicate { column }));
            }
        }
        if !assessment.configurable {
            let stale = left_out
                .iter()
                .filter_map(|(_, why)| match why {
                    LeftOut::Stale { column, mod_counter, set_mod_counter } => {
                        Some((*column, *mod_counter, *set_mod_counter))
                    }
                    _ => None,
                })
                .collect();
            return Err(SetPlanError::NotEnoughComponents {
                serial: want,
                level: level.as_char(),
                missing: assessment.missing_columns(),
                stale,
            });
        }
        SetPlan::build(components, first, columns, left_out, assessment.mod_counter, assessment.clean)
    }

    /// The set a raidctl configuration file describes, as `raidctl -c` configures it:
    /// `components[c]` is what was read from the file's device for column `c` (`None` for
    /// `absent`, a device that cannot be read, or one without a label NetBSD would accept).
    pub fn from_config_file(
        config: &RaidConfig,
        components: &[Option<ReadComponent>],
    ) -> Result<SetPlan, SetPlanError> {
        let n = usize::try_from(config.num_columns).unwrap_or(0);
        if config.disks.len() != n || components.len() != n {
            return Err(SetPlanError::ColumnCount { listed: components.len(), columns: config.num_columns });
        }
        let level = config.layout.level;
        let labels: Vec<Option<&ComponentLabel>> = components.iter().map(|c| c.as_ref().map(|c| &c.label)).collect();
        let (serial, mod_counter, failed, parity_good) = match check_labels(level.as_char(), n, &labels) {
            ConfigureCheck::Configures { serial_number, mod_counter, failed, parity_good } => {
                (serial_number, mod_counter, failed, parity_good)
            }
            ConfigureCheck::Refused(r) => return Err(SetPlanError::Refused(r)),
        };
        let mut left_out = Vec::new();
        let columns: Vec<ColumnStart> = (0..n)
            .map(|c| match &components[c] {
                Some(_) if failed.contains(&c) => {
                    left_out.push((c, LeftOut::Maverick { column: c }));
                    ColumnStart::Missing
                }
                Some(_) => ColumnStart::Fresh(c),
                None => ColumnStart::Missing,
            })
            .collect();
        let fresh: Vec<&ComponentLabel> = columns
            .iter()
            .filter_map(|c| match c {
                ColumnStart::Fresh(i) => labels[*i],
                _ => None,
            })
            .collect();
        let Some(first) = fresh.first().copied() else {
            return Err(SetPlanError::NotEnoughComponents {
                serial,
                level: level.as_char(),
                missing: (0..n).collect(),
                stale: Vec::new(),
            });
        };
        for (c, label) in columns.iter().filter_map(|c| match c {
            ColumnStart::Fresh(i) => labels[*i].map(|l| (*i, l)),
            ColumnStart::Missing => None,
        }) {
            check_file_against_label(config, c, label)?;
        }
        let missing: Vec<usize> = (0..n).filter(|&c| columns[c] == ColumnStart::Missing).collect();
        let alive = |c: usize| columns[c] != ColumnStart::Missing;
        let enough = match level {
            Level::Raid0 => missing.is_empty(),
            Level::Raid1 => (0..n / 2).all(|p| alive(2 * p) || alive(2 * p + 1)),
            Level::Raid4 | Level::Raid5 => missing.len() <= 1,
        };
        if !enough {
            return Err(SetPlanError::NotEnoughComponents {
                serial,
                level: level.as_char(),
                missing,
                stale: Vec::new(),
            });
        }
        let owned: Vec<ReadComponent> = components.iter().map(|c| c.clone().unwrap_or_else(blank)).collect();
        SetPlan::build(&owned, first, columns, left_out, mod_counter, parity_good)
    }

    fn build(
        components: &[ReadComponent],
        first: &ComponentLabel,
        columns: Vec<ColumnStart>,
        left_out: Vec<(usize, LeftOut)>,
        mod_counter: i32,
        labels_clean: bool,
    ) -> Result<SetPlan, SetPlanError> {
        let serial = first.serial_number;
        let level = level_of(first)?;
        let fresh: Vec<&ReadComponent> = columns
            .iter()
            .filter_map(|c| match c {
                ColumnStart::Fresh(i) => Some(&components[*i]),
                _ => None,
            })
            .collect();
        if let Some(other) = fresh.iter().find(|c| c.label.num_blocks != first.num_blocks) {
            return Err(SetPlanError::SizesDisagree { a: first.num_blocks, b: other.label.num_blocks });
        }
        let geometry = Geometry::new(
            level,
            first.num_columns as u32,
            u64::try_from(first.sect_per_su).unwrap_or(0),
            first.num_blocks,
        )
        .map_err(|source| SetPlanError::Geometry { serial, source })?;
        let layout = SetLayout::new(geometry, u64::try_from(first.block_size).unwrap_or(0))
            .map_err(|source| SetPlanError::Layout { serial, source })?;
        let parity_map = if level == Level::Raid0 {
            MapStart::NoParity
        } else {
            match parity_map_verdict(fresh.iter().map(|c| &c.label)) {
                ParityMapVerdict::Disabled => MapStart::Disabled,
                ParityMapVerdict::Use { regions, tickms, ntick } => {
                    let mut merged: Option<ParityMap> = None;
                    let mut readable = true;
                    for c in &fresh {
                        match (&mut merged, &c.parity_map) {
                            (_, None) => readable = false,
                            (None, Some(m)) => merged = Some(m.clone()),
                            (Some(acc), Some(m)) => {
                                acc.merge(m);
                            }
                        }
                    }
                    MapStart::InUse { on_disk: merged.filter(|_| readable).map(Box::new), regions, tickms, ntick }
                }
                ParityMapVerdict::Discard { regions, tickms, ntick } => {
                    MapStart::InUse { on_disk: None, regions, tickms, ntick }
                }
            }
        };
        Ok(SetPlan { layout, serial_number: serial, mod_counter, columns, left_out, labels_clean, parity_map })
    }

    /// Whether parity (or the mirror copies) may disagree with the data: the parity map in use
    /// marks a region dirty, or, without a map the kernel trusts, a fresh label is dirty. A
    /// trusted map speaks for the whole set whatever the labels say, as NetBSD's rewrite
    /// (`rf_paritymap_rewrite`) rewrites only the regions it marks: dirty labels and a map that
    /// marks nothing mean parity known good.
    pub fn needs_resync(&self) -> bool {
        if self.layout.raid_geometry().level == Level::Raid0 {
            return false;
        }
        match &self.parity_map {
            MapStart::InUse { on_disk: Some(map), .. } => map.dirty_regions().next().is_some(),
            // An untrusted map is replaced by the kernel as the clean flags say.
            MapStart::InUse { on_disk: None, .. } | MapStart::Disabled | MapStart::NoParity => !self.labels_clean,
        }
    }

    /// The labels' parity map fields as this set's configure writes them; see
    /// [`map_fields_at_configure`].
    pub fn configured_map_fields(&self, first: Option<&ComponentLabel>) -> Option<(u32, u32, u32, u32)> {
        let g = self.layout.raid_geometry();
        map_fields_at_configure(&self.parity_map, first, g.sectors_per_disk, self.layout.sector_bytes())
    }

    /// Put the configuration file's hot spares that NetBSD's reconstruction left serving a
    /// column (`raidctl -F`) back in it: a spare whose label is this set's (serial number,
    /// geometry), at the set's mod_counter, naming a column that has no fresh component. That
    /// label is the only record the driver writes of a used spare, and autoconfiguration reads
    /// it so; NetBSD's `raidctl -c` instead takes the file's word, fails the column and leaves
    /// the spare unused. `spares[k]` is what was read from the file's spare `k`, given to the
    /// set as component `first_index + k`. Returns (spare, column) for each spare put in.
    pub fn take_used_spares(&mut self, spares: &[Option<ReadComponent>], first_index: usize) -> Vec<(usize, usize)> {
        let mut taken = Vec::new();
        let g = self.layout.raid_geometry();
        for (k, spare) in spares.iter().enumerate() {
            let Some(spare) = spare else { continue };
            let l = &spare.label;
            let Ok(column) = usize::try_from(l.column) else { continue };
            let fits = l.serial_number == self.serial_number
                && l.mod_counter == self.mod_counter
                && u32::try_from(l.num_columns).ok() == Some(g.columns)
                && u64::try_from(l.sect_per_su).ok() == Some(g.sect_per_su)
                && l.level_char() == Some(g.level.as_char())
                && l.num_blocks == g.sectors_per_disk;
            if !fits || self.columns.get(column) != Some(&ColumnStart::Missing) {
                continue;
            }
            self.columns[column] = ColumnStart::Fresh(first_index + k);
            self.labels_clean &= l.clean == uraid_raidframe_format::label::RAID_CLEAN;
            taken.push((k, column));
        }
        taken
    }

    /// Columns without a fresh component.
    pub fn missing_columns(&self) -> Vec<usize> {
        (0..self.columns.len()).filter(|&c| self.columns[c] == ColumnStart::Missing).collect()
    }

    /// The component serving `column`, if one does.
    pub fn component_of(&self, column: usize) -> Option<usize> {
        match self.columns.get(column) {
            Some(ColumnStart::Fresh(i)) => Some(*i),
            _ => None,
        }
    }
}

/// The labels' parity map fields as `rf_paritymap_attach` writes them at configure: flags
/// (VALID and WASUSED, or VALID and DISABLE when a label asked for no map), tick, cooldown and
/// region count (the kernel's default for `sectors_per_disk` when none is recorded); `None` for
/// RAID 0. A disabled map keeps the tick, cooldown and count of `first`, a fresh label.
pub fn map_fields_at_configure(
    parity_map: &MapStart,
    first: Option<&ComponentLabel>,
    sectors_per_disk: u64,
    sector_bytes: u64,
) -> Option<(u32, u32, u32, u32)> {
    match parity_map {
        MapStart::NoParity => None,
        MapStart::Disabled => {
            let (tickms, ntick, regions) =
                first.map_or((0, 0, 0), |l| (l.parity_map_tickms, l.parity_map_ntick, l.parity_map_regions));
            Some((PMLABEL_VALID | PMLABEL_DISABLE, tickms, ntick, regions))
        }
        MapStart::InUse { regions, tickms, ntick, .. } => {
            let regions = if *regions == 0 { default_region_count(sectors_per_disk, sector_bytes) } else { *regions };
            Some((PMLABEL_VALID | PMLABEL_WASUSED, *tickms, *ntick, regions))
        }
    }
}

fn level_of(label: &ComponentLabel) -> Result<Level, SetPlanError> {
    let c = label.level_char().unwrap_or('?');
    Level::from_char(c).ok_or(SetPlanError::UnsupportedLevel { serial: label.serial_number, level: c })
}

/// A stand-in for a column with nothing read; never looked at (its column is missing).
fn blank() -> ReadComponent {
    ReadComponent { label: ComponentLabel::default(), parity_map: None }
}

/// The file's geometry against a fresh label's.
fn check_file_against_label(config: &RaidConfig, column: usize, label: &ComponentLabel) -> Result<(), SetPlanError> {
    let l = &config.layout;
    let checks: [(&'static str, i64, i64); 5] = [
        ("numCol", i64::from(config.num_columns), i64::from(label.num_columns)),
        ("sectPerSU", i64::from(l.sect_per_su), i64::from(label.sect_per_su)),
        ("SUsPerPU", i64::from(l.sus_per_pu), i64::from(label.sus_per_pu)),
        ("SUsPerRU", i64::from(l.sus_per_ru), i64::from(label.sus_per_ru)),
        ("RAID level", i64::from(l.level.as_char() as u8), i64::from(label.parity_config)),
    ];
    for (field, file, on_label) in checks {
        if file != on_label {
            let show = |v: i64| {
                if field == "RAID level" {
                    u8::try_from(v).map_or(v.to_string(), |b| (b as char).to_string())
                } else {
                    v.to_string()
                }
            };
            return Err(SetPlanError::FileDisagrees { column, field, file: show(file), label: show(on_label) });
        }
    }
    Ok(())
}

/// The devices a configuration file names, column by column (`None` for `absent`).
pub fn file_components(config: &RaidConfig) -> Vec<Option<&str>> {
    config.disks.iter().map(|d| (d != ABSENT).then_some(d.as_str())).collect()
}

#[cfg(test)]
mod tests;
