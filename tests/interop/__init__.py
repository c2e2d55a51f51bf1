"""Interoperability with independent Sereal implementations (Perl's Sereal XS)."""
