#!/usr/bin/perl
# Python -> Perl interop: decode documents written by sereal_codec.
#
# Reads lines "<name>\t<hex of the document>\n" on stdin and prints one JSON object per
# line on stdout:
#   {"name":..,"value":<canonical body>,"header":<canonical user header or null>,
#    "validate_utf8":"same"|"different"|"error: ..","error":null|".."}
# "validate_utf8" reports decoding the same document with
# Sereal::Decoder->new({validate_utf8 => 1}) and comparing with the plain decoding.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Canon;
use Sereal::Decoder;

binmode STDIN;
binmode STDOUT;

my $plain    = Sereal::Decoder->new;
my $validate = Sereal::Decoder->new( { validate_utf8 => 1 } );

while ( my $line = <STDIN> ) {
    chomp $line;
    my ( $name, $hex ) = split /\t/, $line, 2;
    my $doc = pack "H*", $hex;
    my %rec = ( name => $name, value => undef, header => undef, error => undef );
    my $res = eval { $plain->decode_with_header($doc) };
    if ( !$res ) {
        $rec{error} = "$@" || "unknown error";
        $rec{validate_utf8} = "not run";
    }
    else {
        my ( $hdr, $body ) = @$res;
        $rec{value}  = Canon::canon($body);
        $rec{header} = Canon::canon($hdr);
        my $vres = eval { $validate->decode_with_header($doc) };
        if ( !$vres ) {
            $rec{validate_utf8} = "error: " . ( $@ || "unknown" );
        }
        else {
            my $same = Canon::json( Canon::canon( $vres->[1] ) ) eq Canon::json( $rec{value} )
                && Canon::json( Canon::canon( $vres->[0] ) ) eq Canon::json( $rec{header} );
            $rec{validate_utf8} = $same ? "same" : "different";
        }
    }
    print Canon::json( \%rec ), "\n";
}
