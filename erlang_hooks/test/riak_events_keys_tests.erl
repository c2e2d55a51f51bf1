-module(riak_events_keys_tests).

-include("riak_events_test.hrl").

-define(M, riak_events_keys).

metadata_key_test_() ->
    [?_assertEqual({ok, 1413813813, <<"2">>}, ?M:parse_metadata_key(<<"1413813813-2">>)),
     ?_assertEqual({ok, 0, <<"dc_1">>}, ?M:parse_metadata_key(<<"0-dc_1">>)),
     ?_assertEqual({ok, 9223372036854775807, <<"a">>},
                   ?M:parse_metadata_key(<<"9223372036854775807-a">>)),
     ?_assertMatch({error, {epoch, too_large}},
                   ?M:parse_metadata_key(<<"9223372036854775808-a">>)),
     ?_assertMatch({error, {epoch, not_canonical}}, ?M:parse_metadata_key(<<"01-a">>)),
     ?_assertMatch({error, {epoch, not_canonical}}, ?M:parse_metadata_key(<<"+1-a">>)),
     ?_assertMatch({error, {epoch, not_canonical}}, ?M:parse_metadata_key(<<"-a">>)),
     ?_assertMatch({error, {dc, _}}, ?M:parse_metadata_key(<<"1-">>)),
     ?_assertMatch({error, {dc, _}}, ?M:parse_metadata_key(<<"1-a-b">>)),
     ?_assertMatch({error, {dc, _}}, ?M:parse_metadata_key(<<"1-a.b">>)),
     ?_assertMatch({error, no_dash}, ?M:parse_metadata_key(<<"1413813813">>)),
     ?_assertMatch({error, not_a_binary}, ?M:parse_metadata_key("1-a"))].

value_test_() ->
    [?_assertEqual({ok, []}, ?M:parse_value(<<>>)),
     ?_assertEqual({ok, [<<"t::10">>, <<"t::2">>, <<"type1:subtype1:0">>]},
                   ?M:parse_value(<<"type1:subtype1:0|t::2|t::10|t::2">>)),
     ?_assertEqual({ok, [<<"a.b:c.d:0">>]}, ?M:parse_value(<<"a.b:c.d:0">>)),
     ?_assertMatch({error, {entry, <<"t:s">>}}, ?M:parse_value(<<"t::0|t:s">>)),
     ?_assertMatch({error, {entry, <<>>}}, ?M:parse_value(<<"t::0|">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"t::0:1">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<":s:0">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"t::01">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"t::-1">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"t::9223372036854775808">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"t-x::0">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"t::0 ">>)),
     ?_assertMatch({error, _}, ?M:parse_value(<<"caf", 233, "::0">>)),
     ?_assertMatch({error, not_a_binary}, ?M:parse_value(undefined))].

merge_values_test_() ->
    [?_assertEqual({[<<"a::0">>, <<"a::1">>, <<"b::0">>], []},
                   ?M:merge_values([<<"a::1|b::0">>, <<"a::0|a::1">>])),
     ?_assertEqual({[<<"a::1">>], [{entry, <<"bad">>}]},
                   ?M:merge_values([<<"bad">>, <<"a::1">>])),
     ?_assertEqual({[], []}, ?M:merge_values([<<>>])),
     ?_assertEqual({[], []}, ?M:merge_values([]))].

chunk_keys_test() ->
    ?assertEqual([<<"1413813813:2:type3::0">>, <<"1413813813:2:type1:subtype1:1">>],
                 ?M:chunk_keys(1413813813, <<"2">>, [<<"type3::0">>, <<"type1:subtype1:1">>])).
