"""Source trees: revisions of a local git repository, safe extraction of untrusted archives, their content
hashes, and the cache directory they are kept in."""
