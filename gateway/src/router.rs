//! Finds the route of a request: by path first, then by method, so that a known path with
//! the wrong method is a 405 that names the allowed ones.

use crate::endpoint::{Endpoint, Method};

pub struct Router {
    routes: Vec<(Vec<Segment>, Endpoint)>,
}

enum Segment {
    Literal(&'static str),
    Param(&'static str),
}

pub enum Match<'r> {
    Found(&'r Endpoint, Vec<(&'static str, String)>),
    MethodNotAllowed(Vec<Method>),
    NotFound,
}

impl Router {
    pub fn new(routes: Vec<Endpoint>) -> Self {
        let mut routes = routes
            .into_iter()
            .map(|route| {
                let segments = route
                    .path
                    .trim_start_matches('/')
                    .split('/')
                    .map(|segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                        Some(name) => Segment::Param(name),
                        None => Segment::Literal(segment),
                    })
                    .collect::<Vec<_>>();
                (segments, route)
            })
            .collect::<Vec<(Vec<Segment>, Endpoint)>>();
        // A literal segment wins over a parameter in the same place (`/contacts/bulk` is not
        // the contact `bulk`), whatever order the modules declare their routes in.
        routes.sort_by_key(|(segments, _)| specificity(segments));
        Self { routes }
    }

    pub fn find(&self, method: Option<Method>, path: &str) -> Match<'_> {
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let mut allowed = Vec::new();
        let mut best = None;
        for (segments, route) in &self.routes {
            let Some(params) = match_segments(segments, &parts) else {
                continue;
            };
            // Only the most specific matching path counts; its other methods are the allowed ones.
            let rank = specificity(segments);
            if *best.get_or_insert_with(|| rank.clone()) != rank {
                continue;
            }
            if Some(route.method) == method {
                return Match::Found(route, params);
            }
            allowed.push(route.method);
        }
        if allowed.is_empty() { Match::NotFound } else { Match::MethodNotAllowed(allowed) }
    }
}

/// Sorts paths with a literal where others have a parameter first.
fn specificity(segments: &[Segment]) -> Vec<bool> {
    segments.iter().map(|segment| matches!(segment, Segment::Param(_))).collect()
}

fn match_segments(segments: &[Segment], parts: &[&str]) -> Option<Vec<(&'static str, String)>> {
    if segments.len() != parts.len() {
        return None;
    }
    let mut params = Vec::new();
    for (segment, part) in segments.iter().zip(parts) {
        match segment {
            Segment::Literal(literal) if literal == part => {}
            Segment::Literal(_) => return None,
            Segment::Param(_) if part.is_empty() => return None,
            Segment::Param(name) => params.push((*name, percent_decode(part))),
        }
    }
    Some(params)
}

/// The whole segment, percent-decoded: `&`, `=`, `+` and `;` are the segment's own characters
/// here, not separators, so `<uuid>&junk=1` stays a value that is not an id. Bytes that are not
/// UTF-8 become U+FFFD, which no parameter's schema accepts.
fn percent_decode(part: &str) -> String {
    percent_encoding::percent_decode_str(part).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Call;
    use crate::endpoint::{Data, Input};

    async fn nothing(_: Call, _: Input) -> switchboard_kit::ServiceResult<Data<()>> {
        Err(switchboard_kit::ServiceError::not_found("x"))
    }

    fn router() -> Router {
        Router::new(vec![
            Endpoint::get("/v1/agents", nothing),
            Endpoint::get("/v1/agents/{agentId}/instructions", nothing),
            Endpoint::put("/v1/agents/{agentId}/instructions", nothing),
        ])
    }

    #[test]
    fn params_are_extracted() {
        match router().find(Some(Method::Put), "/v1/agents/abc/instructions") {
            Match::Found(route, params) => {
                assert_eq!(route.method, Method::Put);
                assert_eq!(params, vec![("agentId", "abc".to_owned())]);
            }
            _ => panic!("no match"),
        }
    }

    #[test]
    fn wrong_method_lists_the_allowed_ones() {
        match router().find(Some(Method::Delete), "/v1/agents/abc/instructions") {
            Match::MethodNotAllowed(allowed) => assert_eq!(allowed, vec![Method::Get, Method::Put]),
            _ => panic!("expected 405"),
        }
    }

    #[test]
    fn a_literal_segment_wins_over_a_parameter() {
        let router = Router::new(vec![
            Endpoint::get("/v1/contacts/{contactId}", nothing),
            Endpoint::delete("/v1/contacts/{contactId}", nothing),
            Endpoint::post("/v1/contacts/bulk", nothing),
        ]);
        match router.find(Some(Method::Post), "/v1/contacts/bulk") {
            Match::Found(route, params) => assert_eq!((route.path, params.len()), ("/v1/contacts/bulk", 0)),
            _ => panic!("no match"),
        }
        match router.find(Some(Method::Delete), "/v1/contacts/bulk") {
            Match::MethodNotAllowed(allowed) => assert_eq!(allowed, vec![Method::Post]),
            _ => panic!("expected 405"),
        }
        assert!(matches!(router.find(Some(Method::Delete), "/v1/contacts/abc"), Match::Found(..)));
    }

    #[test]
    fn a_segment_is_decoded_whole() {
        let found = |path: &str| match router().find(Some(Method::Get), path) {
            Match::Found(_, params) => params[0].1.clone(),
            _ => panic!("no match for {path}"),
        };
        assert_eq!(found("/v1/agents/abc&junk=1/instructions"), "abc&junk=1");
        assert_eq!(found("/v1/agents/a%2Fb+c;d/instructions"), "a/b+c;d");
        assert_eq!(found("/v1/agents/%E2%9C%93/instructions"), "\u{2713}");
        assert_eq!(found("/v1/agents/%FF/instructions"), "\u{FFFD}");
    }

    #[test]
    fn unknown_paths_and_empty_params_are_not_found() {
        assert!(matches!(router().find(Some(Method::Get), "/v1/nope"), Match::NotFound));
        assert!(matches!(router().find(Some(Method::Get), "/v1/agents//instructions"), Match::NotFound));
        assert!(matches!(router().find(Some(Method::Get), "/v1/agents/"), Match::Found(..)));
    }
}
