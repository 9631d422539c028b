//! Which running array a list of member devices belongs to: commands that rewrite members
//! (`grow` in its forms) must leave a served array's members to its server.

/// The running array (by name, and its control socket) that `members` belong to, if uraid
/// runs one: a reshape of its members must be the server's (it rewrites every member under
/// the server's feet otherwise; uraid takes no lock on served members). Arrays served by hand
/// (`uraid serve` without `assemble`) are not known here.
pub fn served_by(members: &[std::path::PathBuf]) -> Option<(String, std::path::PathBuf)> {
    let runtime = crate::runtime_dir::RuntimeDir::from_env().ok()?;
    let running = runtime.running().ok()?;
    let ours: Vec<std::path::PathBuf> = members.iter().filter_map(|m| std::fs::canonicalize(m).ok()).collect();
    for array in running {
        let socket = array.dir.control_socket();
        let Ok(status) = super::ctl::status(&socket) else { continue };
        let served = status["members"].as_array().into_iter().flatten().filter_map(|m| m["path"].as_str());
        for path in served {
            if std::fs::canonicalize(path).is_ok_and(|p| ours.contains(&p)) {
                return Some((array.dir.name().to_string(), socket));
            }
        }
    }
    None
}
