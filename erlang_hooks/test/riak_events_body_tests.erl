-module(riak_events_body_tests).

-include("riak_events_test.hrl").

encode_test_() ->
    [?_assertEqual(<<"{\"epoch\":1413813813,\"dc\":\"2\",\"keys\":[\"1413813813:2:a::0\","
                     "\"1413813813:2:b:c:1\"]}">>,
                   riak_events_body:encode(1413813813, <<"2">>,
                                           [<<"1413813813:2:a::0">>, <<"1413813813:2:b:c:1">>])),
     ?_assertEqual(<<"{\"epoch\":0,\"dc\":\"x\",\"keys\":[]}">>,
                   riak_events_body:encode(0, <<"x">>, [])),
     %% Never reached with valid names; the document stays valid JSON anyway.
     ?_assertEqual(<<"{\"epoch\":1,\"dc\":\"a\\\"\\\\\\u000a\\u00e9\",\"keys\":[]}">>,
                   riak_events_body:encode(1, <<"a\"\\\n", 233>>, []))].
