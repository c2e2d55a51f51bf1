%% @doc The hook and the notifier together, in this VM: stand-in riak_object, a static
%% ring, and companions that are real TCP listeners speaking enough HTTP.
-module(riak_events_notifier_tests).

-include("riak_events_test.hrl").

-define(NODES, ['a@127.0.0.1', 'b@127.0.0.1', 'c@127.0.0.1']).
-define(EPOCHS, {<<"epochs">>, <<"epochs">>}).
-define(BODIES, riak_events_notifier_tests_bodies).

%% -- fixtures ------------------------------------------------------------------------

notifier_test_() ->
    {foreach, fun setup/0, fun cleanup/1,
     [fun routes_siblings_to_companions/1,
      fun tombstones_are_skipped/1,
      fun garbage_never_crashes_the_put_path/1,
      fun bad_metadata_is_counted/1,
      fun dead_companion_opens_breaker/1,
      fun full_backlog_drops_and_counts/1,
      fun dead_notifier_is_restarted/1]}.

setup() ->
    ok = riak_events_notifier:stop(),
    _ = application:load(riak_events_hook),
    Owners = [lists:nth(I rem 3 + 1, ?NODES) || I <- lists:seq(0, 15)],
    Companion = companion(),
    Url = "http://127.0.0.1:" ++ integer_to_list(port(Companion)),
    Env = [{ring, {static, #{owners => Owners, n_val => 2, down => ['c@127.0.0.1']}}},
           {companion_urls, maps:from_list([{N, Url} || N <- ?NODES])},
           {timeout_ms, 300}, {breaker_failures, 2}, {breaker_cooldown_ms, 200000},
           {queue_max, 100}, {log_interval_ms, 60000}],
    [application:set_env(riak_events_hook, K, V) || {K, V} <- Env],
    #{companion => Companion, owners => Owners}.

cleanup(#{companion := Companion}) ->
    ok = riak_events_notifier:stop(),
    [application:unset_env(riak_events_hook, K)
     || {K, _} <- application:get_all_env(riak_events_hook)],
    %% Wait for its death: the next setup creates the same named table.
    Ref = monitor(process, Companion),
    exit(Companion, kill),
    receive {'DOWN', Ref, process, Companion, _} -> ok end.

%% A companion stand-in: accepts, reads one request per connection, records
%% {Path, Body} in a public table and answers 202. Tests may run in other processes
%% than this setup, so results go to a table, not to a mailbox.
companion() ->
    Self = self(),
    Pid = spawn(fun() ->
                        ets:new(?BODIES, [named_table, public, duplicate_bag]),
                        {ok, L} = gen_tcp:listen(0, [binary, {active, false},
                                                     {reuseaddr, true}]),
                        {ok, Port} = inet:port(L),
                        Self ! {port, self(), Port},
                        accept(L)
                end),
    receive {port, Pid, Port} -> put({port, Pid}, Port), Pid
    after 5000 -> error(companion_did_not_start)
    end.

port(Pid) -> get({port, Pid}).

accept(L) ->
    {ok, S} = gen_tcp:accept(L),
    Pid = spawn(fun() -> receive go -> serve(S) end end),
    ok = gen_tcp:controlling_process(S, Pid),
    Pid ! go,
    accept(L).

serve(S) ->
    ok = inet:setopts(S, [{packet, http_bin}]),
    {ok, {http_request, 'POST', {abs_path, Path}, _}} = gen_tcp:recv(S, 0, 5000),
    Length = headers(S, 0),
    ok = inet:setopts(S, [{packet, raw}]),
    {ok, Body} = gen_tcp:recv(S, Length, 5000),
    ets:insert(?BODIES, {body, {Path, Body}}),
    gen_tcp:send(S, <<"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n">>),
    gen_tcp:close(S).

headers(S, Length) ->
    case gen_tcp:recv(S, 0, 5000) of
        {ok, {http_header, _, 'Content-Length', _, V}} -> headers(S, binary_to_integer(V));
        {ok, {http_header, _, _, _, _}} -> headers(S, Length);
        {ok, http_eoh} -> Length
    end.

%% -- helpers -------------------------------------------------------------------------

put_object(Key, Siblings) ->
    riak_events_hook:postcommit(riak_object:new(?EPOCHS, Key, Siblings)).

wait_idle() -> wait_idle(200).

wait_idle(0) -> error(not_idle);
wait_idle(N) ->
    case riak_events_notifier:idle() of
        true -> ok;
        false -> timer:sleep(10), wait_idle(N - 1)
    end.

bodies() ->
    [B || {body, B} <- ets:take(?BODIES, body)].

delta(Before) ->
    maps:filter(fun(_, V) -> V =/= 0 end,
                maps:map(fun(K, V) -> V - maps:get(K, Before, 0) end,
                         maps:with(counters(), riak_events_stats:all()))).

counters() ->
    riak_events_stats:names() -- [backlog, queue_len, in_flight, queue_max].

expected_bodies(#{owners := Owners}, Epoch, DC, Entries) ->
    {ok, View} = riak_events_ring:view(
                   {static, #{owners => Owners, n_val => 2, down => ['c@127.0.0.1']}},
                   <<"events">>, <<"events">>),
    Keys = riak_events_keys:chunk_keys(Epoch, DC, Entries),
    {Groups, []} = riak_events_route:group(Keys, View),
    lists:sort([{<<"/v1/keys">>, riak_events_body:encode(Epoch, DC, Ks)} || {_, Ks} <- Groups]).

stats() ->
    {ok, _} = riak_events_notifier:start(),
    riak_events_stats:all().

%% -- tests ---------------------------------------------------------------------------

routes_siblings_to_companions(Ctx) ->
    fun() ->
            Before = stats(),
            Entries = [iolist_to_binary(["t", integer_to_list(I rem 3), "::",
                                         integer_to_list(I)]) || I <- lists:seq(0, 29)],
            {A, B} = lists:split(20, Entries),
            ok = put_object(<<"1413813813-dc1">>,
                            [iolist_to_binary(lists:join("|", A)),
                             {<<>>, deleted},
                             iolist_to_binary(lists:join("|", lists:reverse(B) ++ A))]),
            wait_idle(),
            Want = expected_bodies(Ctx, 1413813813, <<"dc1">>, lists:sort(Entries)),
            ?assertEqual(2, length(Want)),  % c is down: a and b hold every key
            ?assertEqual(Want, lists:sort(bodies())),
            ?assertEqual(#{received => 1, keys => 30, posted => 2}, delta(Before))
    end.

tombstones_are_skipped(_) ->
    fun() ->
            Before = stats(),
            ok = put_object(<<"1-dc1">>, [{<<>>, deleted}, {<<"t::0">>, deleted}]),
            wait_idle(),
            ?assertEqual([], bodies()),
            ?assertEqual(#{tombstones => 1}, delta(Before))
    end.

garbage_never_crashes_the_put_path(_) ->
    fun() ->
            Before = stats(),
            ?assertEqual(ok, riak_events_hook:postcommit(not_an_object)),
            %% A value that is not a binary: a parse error in the notifier.
            ?assertEqual(ok, put_object(<<"1-x">>, [{not_binary}])),
            wait_idle(),
            ?assertEqual(#{hook_errors => 1, received => 1, parse_errors => 1},
                         delta(Before))
    end.

bad_metadata_is_counted(_) ->
    fun() ->
            Before = stats(),
            ok = put_object(<<"not-a-key">>, [<<"t::0">>]),
            ok = put_object(<<"5-dc">>, [<<"t::0|bad">>, <<"u::1">>]),
            wait_idle(),
            ?assertMatch([{<<"/v1/keys">>, <<"{\"epoch\":5,\"dc\":\"dc\",\"keys\":[\"5:dc:u::1\"]}">>}],
                         bodies()),
            ?assertEqual(#{received => 2, parse_errors => 2, keys => 1, posted => 1},
                         delta(Before))
    end.

dead_companion_opens_breaker(_) ->
    fun() ->
            {ok, L} = gen_tcp:listen(0, []),
            {ok, Port} = inet:port(L),
            gen_tcp:close(L),
            Dead = "http://127.0.0.1:" ++ integer_to_list(Port),
            application:set_env(riak_events_hook, companion_urls,
                                maps:from_list([{N, Dead} || N <- ?NODES])),
            Before = stats(),
            ok = riak_events_notifier:reload_config(),
            [begin
                 T0 = erlang:monotonic_time(microsecond),
                 ok = put_object(<<"7-dc">>, [<<"t::", (integer_to_binary(I))/binary>>]),
                 ?assert(erlang:monotonic_time(microsecond) - T0 < 50000),
                 wait_idle()
             end || I <- lists:seq(1, 4)],
            ?assertEqual([], bodies()),
            ?assertEqual(#{received => 4, keys => 4, failed => 2, breaker_open => 1,
                           breaker_rejected => 2}, delta(Before)),
            ?assertMatch(#{breakers := #{Dead := #{state := open}}},
                         riak_events_notifier:status())
    end.

full_backlog_drops_and_counts(_) ->
    fun() ->
            application:set_env(riak_events_hook, queue_max, 2),
            Before = stats(),
            ok = riak_events_notifier:reload_config(),
            ok = sys:suspend(riak_events_notifier),
            [ok = put_object(<<"9-dc">>, [<<"t::0">>]) || _ <- lists:seq(1, 5)],
            ?assertEqual(2, riak_events_stats:value(backlog)),
            ok = sys:resume(riak_events_notifier),
            wait_idle(),
            ?assertEqual(#{received => 2, dropped => 3, keys => 2, posted => 2},
                         delta(Before)),
            ?assertEqual(2, length(bodies()))
    end.

dead_notifier_is_restarted(_) ->
    fun() ->
            Before = stats(),
            Old = whereis(riak_events_notifier),
            ok = sys:suspend(Old),
            ok = put_object(<<"11-dc">>, [<<"t::0">>]),
            Ref = monitor(process, Old),
            exit(Old, kill),
            receive {'DOWN', Ref, process, Old, killed} -> ok end,
            ok = put_object(<<"12-dc">>, [<<"t::0">>]),
            wait_idle(),
            ?assertNotEqual(Old, whereis(riak_events_notifier)),
            ?assertEqual([{<<"/v1/keys">>, <<"{\"epoch\":12,\"dc\":\"dc\",\"keys\":[\"12:dc:t::0\"]}">>}],
                         bodies()),
            ?assertEqual(#{received => 2, lost => 1, notifier_starts => 1, keys => 1,
                           posted => 1}, delta(Before))
    end.
