//! robots.txt (RFC 9309): the group for our product token, else `*`; the longest matching
//! rule wins and `Allow` wins a tie; `*` matches any run of characters and `$` ends a rule.

/// `(allow, pattern)`
type Rule = (bool, String);
/// The user agents a group names, and its rules.
type Group = (Vec<String>, Vec<Rule>);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Robots {
    rules: Vec<Rule>,
}

impl Robots {
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// Everything disallowed: what RFC 9309 asks when robots.txt cannot be read (5xx).
    pub fn disallow_all() -> Self {
        Self { rules: vec![(false, "/".to_owned())] }
    }

    pub fn parse(text: &str, product: &str) -> Self {
        let product = product.to_ascii_lowercase();
        let mut groups: Vec<Group> = Vec::new();
        let mut collecting_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default().trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if !collecting_agents {
                        groups.push((Vec::new(), Vec::new()));
                        collecting_agents = true;
                    }
                    if let Some(group) = groups.last_mut() {
                        group.0.push(value.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    collecting_agents = false;
                    if let Some(group) = groups.last_mut()
                        && !value.is_empty()
                    {
                        group.1.push((key == "allow", value.to_owned()));
                    }
                }
                _ => {}
            }
        }
        let ours = |agents: &Vec<String>| agents.iter().any(|a| a != "*" && product.contains(a.as_str()));
        let star = |agents: &Vec<String>| agents.iter().any(|a| a == "*");
        let pick: &dyn Fn(&Vec<String>) -> bool =
            if groups.iter().any(|(agents, _)| ours(agents)) { &ours } else { &star };
        let rules = groups.iter().filter(|(agents, _)| pick(agents)).flat_map(|(_, rules)| rules.clone()).collect();
        Self { rules }
    }

    /// `path` with its query, e.g. `/a/b?c=d`.
    pub fn allows(&self, path: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            if matches(pattern, path) {
                let length = pattern.len();
                best = match best {
                    Some((best_length, best_allow))
                        if best_length > length || (best_length == length && best_allow) =>
                    {
                        Some((best_length, best_allow))
                    }
                    _ => Some((length, *allow)),
                };
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// A rule matches a prefix of the path, or all of it when it ends with `$`.
fn matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('$') {
        Some(anchored) => glob(anchored.as_bytes(), path.as_bytes()),
        None => glob(format!("{pattern}*").as_bytes(), path.as_bytes()),
    }
}

/// `*` matches any run of bytes; everything else matches itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star, matched)) = backtrack {
            p = star + 1;
            t = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specific_group_wins_over_the_star_group() {
        let robots = Robots::parse(
            "User-agent: *\nDisallow: /\n\nUser-agent: SwitchboardBot\nDisallow: /private\nAllow: /private/ok\n",
            "SwitchboardBot/0.1",
        );
        assert!(robots.allows("/faq"));
        assert!(!robots.allows("/private/x"));
        assert!(robots.allows("/private/ok/y"));
    }

    #[test]
    fn the_star_group_applies_to_others() {
        let robots = Robots::parse("User-agent: *\nDisallow: /admin\n# comment\nDisallow:\n", "SwitchboardBot");
        assert!(!robots.allows("/admin/page"));
        assert!(robots.allows("/"));
    }

    #[test]
    fn wildcards_and_anchors() {
        let robots = Robots::parse("User-agent: *\nDisallow: /*.pdf$\nDisallow: /tmp*/x\n", "bot");
        assert!(!robots.allows("/files/a.pdf"));
        assert!(robots.allows("/files/a.pdf.html"));
        assert!(!robots.allows("/tmp123/x"));
    }

    #[test]
    fn nothing_is_everything_allowed_and_failure_is_nothing_allowed() {
        assert!(Robots::parse("", "bot").allows("/x"));
        assert!(!Robots::disallow_all().allows("/x"));
    }
}
