"""Who may do what: the audiences of sessions, sources and records and the viewer asking
(:mod:`.audience`); the owner token (:mod:`.owner`) and scoped tokens (:mod:`.tokens`); what a requester may
read and change (:mod:`.scope`); and change requests, applied or held by who sent them (:mod:`.requests`)."""
