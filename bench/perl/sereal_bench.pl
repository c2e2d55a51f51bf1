#!/usr/bin/perl
# Perl's Sereal XS codec on the benchmark events, timed by its own loop.
#
#   perl bench/perl/sereal_bench.pl EVENTS.srl BLOB_OUT REPEAT
#
# EVENTS.srl: the events as one uncompressed Sereal document (written by the Python
# benchmark), decoded once to get the Perl data the encoder is timed on.
# Encodes them REPEAT times (protocol 4, zstd level 3, dedupe_strings), writes the last
# blob to BLOB_OUT, then decodes that blob REPEAT times. Prints one JSON object:
# {"encode_s": best, "decode_s": best, "blob_bytes": n, "events": n, "sereal_version": v}
use strict;
use warnings;
use Sereal::Encoder qw(SRL_ZSTD);
use Sereal::Decoder;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use JSON::PP ();

my ( $events_path, $blob_path, $repeat ) = @ARGV;
die "usage: $0 EVENTS.srl BLOB_OUT REPEAT\n" unless $repeat;

sub slurp {
    open my $fh, "<:raw", $_[0] or die "$_[0]: $!";
    local $/;
    return scalar <$fh>;
}

my $decoder = Sereal::Decoder->new;
my $events  = $decoder->decode( slurp($events_path) );
my $encoder = Sereal::Encoder->new( {
    protocol_version => 4, compress => SRL_ZSTD, compress_level => 3, dedupe_strings => 1,
} );

my ( $blob, $best_encode, $best_decode );
for ( 1 .. $repeat ) {
    my $t0 = clock_gettime(CLOCK_MONOTONIC);
    $blob = $encoder->encode($events);
    my $dt = clock_gettime(CLOCK_MONOTONIC) - $t0;
    $best_encode = $dt if !defined $best_encode || $dt < $best_encode;
}
open my $out, ">:raw", $blob_path or die "$blob_path: $!";
print $out $blob;
close $out or die "$blob_path: $!";

for ( 1 .. $repeat ) {
    my $t0      = clock_gettime(CLOCK_MONOTONIC);
    my $decoded = $decoder->decode($blob);
    my $dt      = clock_gettime(CLOCK_MONOTONIC) - $t0;
    $best_decode = $dt if !defined $best_decode || $dt < $best_decode;
}

print JSON::PP->new->canonical->encode( {
    encode_s => $best_encode, decode_s => $best_decode, blob_bytes => length($blob),
    events => scalar(@$events), sereal_version => "$Sereal::Encoder::VERSION",
} ), "\n";
