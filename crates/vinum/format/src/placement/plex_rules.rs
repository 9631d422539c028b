//! The kernel's rules for a subdisk joining a plex (`gv_sd_to_plex`), for the plex once all
//! its subdisks are in (`gv_update_plex_config`), and for the states objects come up with
//! (`gv_update_sd_state`, `gv_update_plex_state`, `gv_update_vol_state` in
//! `geom_vinum_state.c`). Pure arithmetic; the placement module applies it to drives.

use crate::objects::{PlexOrganization, PlexState, SubdiskState, VolumeState};

/// How lengths change when a subdisk joins a striped or raid5 plex that already has
/// subdisks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StripedJoin {
    /// Bytes the joining subdisk gives back from its end.
    pub trim_joining: u64,
    /// Bytes every subdisk already in the plex gives back from its end.
    pub trim_each_member: u64,
}

/// Why a subdisk cannot join a striped or raid5 plex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinRefusal {
    /// Cut to whole stripes it would have no length left (the kernel would keep a subdisk of
    /// length 0 and cut the plex's other subdisks to 0 as well).
    NoWholeStripe,
    /// Shorter than the subdisks of a plex that existed before this create: the kernel
    /// refuses to shrink it (`GV_ERR_BADSIZE`, "sd too small for plex").
    ShorterThanColumns { column_length: u64 },
}

/// `gv_sd_to_plex` for a striped or raid5 plex whose shortest subdisk is `shortest_member`:
/// the joining subdisk is cut to whole stripes; then, if it is still longer than the
/// shortest subdisk, cut to that length; if it is shorter, a plex being created now has all
/// its other subdisks cut by the difference (they are all equally long by then, so they
/// all end up as long as the new one), and a plex that existed before refuses it.
///
/// The first subdisk of a plex joins untouched: the kernel cuts it to whole stripes only at
/// the end of the create ([`whole_stripes`]).
pub(crate) fn join_striped(
    length: u64,
    stripe_size: u64,
    shortest_member: u64,
    plex_is_new: bool,
) -> Result<StripedJoin, JoinRefusal> {
    let whole = whole_stripes(length, stripe_size);
    if whole == 0 {
        return Err(JoinRefusal::NoWholeStripe);
    }
    let stripe_cut = length - whole;
    if whole >= shortest_member {
        return Ok(StripedJoin { trim_joining: stripe_cut + (whole - shortest_member), trim_each_member: 0 });
    }
    if !plex_is_new {
        return Err(JoinRefusal::ShorterThanColumns { column_length: shortest_member });
    }
    Ok(StripedJoin { trim_joining: stripe_cut, trim_each_member: shortest_member - whole })
}

/// `length` cut down to whole stripes (`s->size % p->stripesize` taken off).
pub(crate) fn whole_stripes(length: u64, stripe_size: u64) -> u64 {
    length - length % stripe_size
}

/// The plex offset the kernel gives a subdisk that names none (`gv_sd_to_plex`): 0 in an
/// empty plex; in a striped or raid5 plex the number of subdisks already in it times the
/// stripe size (its column); in a concat plex the end of the subdisk with the highest plex
/// offset. `members` are `(plex offset, length)` in plex-offset order.
pub(crate) fn default_plex_offset(organization: PlexOrganization, members: &[(u64, u64)]) -> u64 {
    let Some(&(last_offset, last_length)) = members.last() else { return 0 };
    match organization.stripe_size() {
        Some(stripe_size) => (members.len() as u64).saturating_mul(stripe_size),
        None => last_offset.saturating_add(last_length),
    }
}

/// A plex's state from its subdisks' states (`gv_update_plex_state`, `gv_sdstatemap`), for
/// a plex that is not syncing or rebuilding: up when every subdisk is up (growable if a
/// subdisk was added to grow it); with a subdisk down or stale (reviving counts as unusable
/// too) a raid5 plex missing exactly one is degraded and any other plex down; otherwise
/// (initializing subdisks, or none at all) down.
pub fn plex_state(organization: PlexOrganization, members: &[SubdiskState], grows: bool) -> PlexState {
    let any = |wanted: &[SubdiskState]| members.iter().any(|s| wanted.contains(s));
    let unusable = members
        .iter()
        .filter(|s| matches!(s, SubdiskState::Down | SubdiskState::Stale | SubdiskState::Reviving))
        .count();
    if !members.is_empty() && members.iter().all(|&s| s == SubdiskState::Up) {
        if grows {
            PlexState::Growable
        } else {
            PlexState::Up
        }
    } else if any(&[SubdiskState::Down, SubdiskState::Stale]) {
        if matches!(organization, PlexOrganization::Raid5 { .. }) && unusable == 1 {
            PlexState::Degraded
        } else {
            PlexState::Down
        }
    } else {
        PlexState::Down
    }
}

/// A volume's state from its plexes (`gv_update_vol_state`): up when a plex is usable
/// (growable or up, or a degraded raid5 plex), down otherwise and without plexes.
pub fn volume_state(plexes: &[(PlexOrganization, PlexState)]) -> VolumeState {
    let usable = plexes.iter().any(|&(organization, state)| {
        state > PlexState::Degraded
            || (matches!(organization, PlexOrganization::Raid5 { .. }) && state == PlexState::Degraded)
    });
    if usable {
        VolumeState::Up
    } else {
        VolumeState::Down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 65_536;
    const RAID5: PlexOrganization = PlexOrganization::Raid5 { stripe_size: S };
    const STRIPED: PlexOrganization = PlexOrganization::Striped { stripe_size: S };

    #[test]
    fn a_longer_subdisk_is_cut_to_whole_stripes_and_to_the_shortest() {
        // Not whole stripes: the remainder goes (first adjustment in gv_sd_to_plex).
        assert_eq!(
            join_striped(10 * S + 512, S, 10 * S, true),
            Ok(StripedJoin { trim_joining: 512, trim_each_member: 0 })
        );
        // Longer than the plex's subdisks: cut to them (the "else if (remainder > 0)" branch),
        // even when they are not whole stripes yet (the first subdisk is cut only at the end).
        assert_eq!(
            join_striped(12 * S + 512, S, 10 * S + 4096, true),
            Ok(StripedJoin { trim_joining: 512 + 2 * S - 4096, trim_each_member: 0 })
        );
        assert_eq!(join_striped(10 * S, S, 10 * S, false), Ok(StripedJoin { trim_joining: 0, trim_each_member: 0 }));
    }

    #[test]
    fn a_shorter_subdisk_shrinks_a_new_plex_and_is_refused_by_an_old_one() {
        // Newborn plex: the others give back the difference ("Adjust other subdisks").
        assert_eq!(
            join_striped(8 * S + 100, S, 10 * S, true),
            Ok(StripedJoin { trim_joining: 100, trim_each_member: 2 * S })
        );
        // A plex that was there before: GV_ERR_BADSIZE.
        assert_eq!(
            join_striped(8 * S, S, 10 * S, false),
            Err(JoinRefusal::ShorterThanColumns { column_length: 10 * S })
        );
        // Less than one stripe: nothing would be left.
        assert_eq!(join_striped(S - 512, S, 10 * S, true), Err(JoinRefusal::NoWholeStripe));
        assert_eq!(whole_stripes(3 * S - 1, S), 2 * S);
    }

    #[test]
    fn default_plex_offsets_are_columns_or_the_end_of_the_last_subdisk() {
        assert_eq!(default_plex_offset(RAID5, &[]), 0);
        assert_eq!(default_plex_offset(RAID5, &[(0, 10 * S), (S, 10 * S)]), 2 * S);
        // p->sdcount * p->stripesize, whatever offsets the members were given.
        assert_eq!(default_plex_offset(STRIPED, &[(5 * S, 10 * S)]), S);
        assert_eq!(default_plex_offset(PlexOrganization::Concat, &[]), 0);
        assert_eq!(default_plex_offset(PlexOrganization::Concat, &[(0, 3 * S), (3 * S, 7 * S)]), 10 * S);
    }

    #[test]
    fn plex_and_volume_states_follow_the_kernel() {
        use SubdiskState::*;
        assert_eq!(plex_state(STRIPED, &[Up, Up], false), PlexState::Up);
        assert_eq!(plex_state(STRIPED, &[Up, Up], true), PlexState::Growable);
        assert_eq!(plex_state(STRIPED, &[Up, Stale], false), PlexState::Down);
        assert_eq!(plex_state(RAID5, &[Up, Up, Stale], false), PlexState::Degraded);
        assert_eq!(plex_state(RAID5, &[Up, Reviving, Stale], false), PlexState::Down);
        assert_eq!(plex_state(RAID5, &[Up, Initializing, Up], false), PlexState::Down);
        assert_eq!(plex_state(PlexOrganization::Concat, &[], false), PlexState::Down);
        assert_eq!(volume_state(&[]), VolumeState::Down);
        assert_eq!(volume_state(&[(STRIPED, PlexState::Down), (STRIPED, PlexState::Growable)]), VolumeState::Up);
        assert_eq!(volume_state(&[(RAID5, PlexState::Degraded)]), VolumeState::Up);
        assert_eq!(volume_state(&[(STRIPED, PlexState::Degraded)]), VolumeState::Down);
    }
}
