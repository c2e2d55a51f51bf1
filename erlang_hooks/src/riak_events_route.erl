%% @doc Routing of one metadata write (pure, given a ring view): which node gets which
%% chunk keys. The Erlang twin of devnode/routing.py.
%%
%% <ol>
%% <li>Parse the metadata key `<epoch>-<dc>'; a bad key rejects the write.</li>
%% <li>Merge the sibling values (tombstones already removed): sorted union of the
%%     entries of each value that parses; a value that does not parse contributes
%%     nothing and is reported.</li>
%% <li>Build each entry's chunk key and take the first node of its preflist in the
%%     events bucket.</li>
%% <li>Group the keys by node; keys keep the sorted order inside a group; groups come
%%     in the order of their first key.</li>
%% </ol>
-module(riak_events_route).

-export([route/3, group/2]).

-export_type([routing/0]).

-type routing() :: #{epoch := riak_events_keys:epoch(),
                     dc := riak_events_keys:dc(),
                     groups := [{node(), [riak_events_keys:chunk_key()]}],
                     unroutable := [riak_events_keys:chunk_key()],
                     bad_values := [term()]}.

%% @doc Route one metadata write: its key and the values of its live siblings.
-spec route(binary(), [term()], riak_events_ring:view()) ->
          {ok, routing()} | {error, term()}.
route(MetadataKey, Values, View) ->
    case riak_events_keys:parse_metadata_key(MetadataKey) of
        {ok, Epoch, DC} ->
            {Entries, Bad} = riak_events_keys:merge_values(Values),
            Keys = riak_events_keys:chunk_keys(Epoch, DC, Entries),
            {Groups, Unroutable} = group(Keys, View),
            {ok, #{epoch => Epoch, dc => DC, groups => Groups,
                   unroutable => Unroutable, bad_values => Bad}};
        {error, Why} ->
            {error, {metadata_key, Why}}
    end.

%% @doc Group keys by the first node of their preflist.
%% @returns the groups in the order of their first key, and the keys no node holds.
-spec group([binary()], riak_events_ring:view()) ->
          {[{node(), [binary()]}], [binary()]}.
group(Keys, View) ->
    {Order, ByNode, Unroutable} =
        lists:foldl(
          fun(Key, {Order0, ByNode0, None}) ->
                  case riak_events_ring:first_node(View, Key) of
                      {ok, Node} ->
                          case ByNode0 of
                              #{Node := Ks} ->
                                  {Order0, ByNode0#{Node := [Key | Ks]}, None};
                              #{} ->
                                  {[Node | Order0], ByNode0#{Node => [Key]}, None}
                          end;
                      none ->
                          {Order0, ByNode0, [Key | None]}
                  end
          end, {[], #{}, []}, Keys),
    {[{N, lists:reverse(maps:get(N, ByNode))} || N <- lists:reverse(Order)],
     lists:reverse(Unroutable)}.
