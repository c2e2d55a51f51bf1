%% @doc The shared ring vectors (tests/vectors/ring_preflists.json, produced by
%% riak_core itself): the hook's preflists and its routing (first node of each key)
%% must be exactly what they say. The Python twin reads the same file.
-module(riak_events_vectors_tests).

-include("riak_events_test.hrl").

vectors() ->
    Path = case os:getenv("RIAK_EVENTS_VECTORS") of
               false -> "../tests/vectors/ring_preflists.json";
               P -> P
           end,
    riak_events_json_reader:file(Path).

atom(B) -> binary_to_atom(B, utf8).

owners(#{<<"rings">> := Rings}, Size, Nodes) ->
    [Owners] = [O || #{<<"ring_size">> := S, <<"nodes">> := N, <<"owners">> := O} <- Rings,
                     S =:= Size, N =:= Nodes],
    [atom(O) || O <- Owners].

view(Vectors, Case) ->
    #{<<"bucket_type">> := Type, <<"bucket">> := Bucket, <<"ring_size">> := Size,
      <<"nodes">> := Nodes, <<"n_val">> := NVal, <<"down">> := Down} = Case,
    Spec = #{owners => owners(Vectors, Size, Nodes), n_val => NVal,
             down => [atom(D) || D <- Down]},
    T = case Type of null -> <<"default">>; _ -> Type end,
    {ok, View} = riak_events_ring:view({static, Spec}, T, Bucket),
    View.

key(#{<<"key_hex">> := Hex}) -> binary:decode_hex(Hex).

positions(Preflist, Size) ->
    Inc = (1 bsl 160) div Size,
    [[Index div Inc, atom_to_binary(Node, utf8), Type =:= primary]
     || {{Index, Node}, Type} <- Preflist].

all_cases_test_() ->
    Vectors = vectors(),
    Cases = maps:get(<<"cases">>, Vectors),
    [?_assert(length(Cases) >= 400)
     | [{lists:flatten(io_lib:format("case ~b", [I])),
         fun() ->
                 View = view(Vectors, Case),
                 #{<<"expected">> := Expected, <<"ring_size">> := Size} = Case,
                 ?assertEqual(Expected,
                              positions(riak_events_ring:preflist(View, key(Case)), Size)),
                 Routed = case riak_events_ring:first_node(View, key(Case)) of
                              {ok, Node} -> atom_to_binary(Node, utf8);
                              none -> none
                          end,
                 ?assertEqual(case Expected of [[_, N, _] | _] -> N; [] -> none end, Routed)
         end}
        || {I, Case} <- lists:zip(lists:seq(1, length(Cases)), Cases)]].

hash_div_test() ->
    %% With every node up, the first primary is position hash_div + 1 (mod Q).
    Vectors = vectors(),
    [begin
         #{<<"hash_div">> := Div, <<"ring_size">> := Size} = Case,
         View = view(Vectors, Case#{<<"down">> := []}),
         [{{Index, _}, _} | _] = riak_events_ring:preflist(View, key(Case)),
         ?assertEqual((Div + 1) rem Size, Index div ((1 bsl 160) div Size))
     end || Case <- maps:get(<<"cases">>, Vectors)].

%% The router groups by the vectors' first node, for each ring and bucket together.
grouping_test() ->
    Vectors = vectors(),
    Cases = [C || C <- maps:get(<<"cases">>, Vectors), maps:get(<<"expected">>, C) =/= []],
    Classes = lists:usort([{maps:get(<<"bucket_type">>, C), maps:get(<<"bucket">>, C),
                            maps:get(<<"ring_size">>, C), maps:get(<<"nodes">>, C),
                            maps:get(<<"n_val">>, C), maps:get(<<"down">>, C)} || C <- Cases]),
    [begin
         Members = [C || C <- Cases,
                         {maps:get(<<"bucket_type">>, C), maps:get(<<"bucket">>, C),
                          maps:get(<<"ring_size">>, C), maps:get(<<"nodes">>, C),
                          maps:get(<<"n_val">>, C), maps:get(<<"down">>, C)} =:= Class],
         View = view(Vectors, hd(Members)),
         Keys = [key(C) || C <- Members],
         {Groups, []} = riak_events_route:group(Keys, View),
         Want = [{key(C), atom(Node)}
                 || C <- Members, [[_, Node, _] | _] <- [maps:get(<<"expected">>, C)]],
         Got = [{K, N} || {N, Ks} <- Groups, K <- Ks],
         ?assertEqual(lists:sort(Want), lists:sort(Got))
     end || Class <- Classes].
