// Drives the data providers frontends use, as an admin app drives them,
// against one REST backend: `node providers.mjs <base-url>`. Prints one JSON
// line per call: {provider, call, data, total} or {provider, call, error}.
// tests/frontend_providers.rs runs it against `anypath up` and against
// json-server 0.17.4, each seeded alike, and compares the lines.

import jsonServerProvider from 'ra-data-json-server';
import simpleRestProvider from 'ra-data-simple-rest';
import refineSimpleRest from '@refinedev/simple-rest';

const base = process.argv[2];
if (!base) {
    console.error('usage: node providers.mjs <base-url>');
    process.exit(2);
}

async function record(provider, call, run) {
    try {
        const answer = await run();
        console.log(JSON.stringify({ provider, call, data: answer.data, total: answer.total ?? null }));
    } catch (error) {
        console.log(JSON.stringify({ provider, call, error: String(error?.message ?? error) }));
    }
}

// react-admin's two providers share one call set.
async function reactAdmin(name, provider) {
    const page = (page, perPage) => ({ page, perPage });
    await record(name, 'getList sorted page', () =>
        provider.getList('posts', { pagination: page(1, 2), sort: { field: 'views', order: 'DESC' }, filter: {} }));
    await record(name, 'getList second page', () =>
        provider.getList('posts', { pagination: page(2, 2), sort: { field: 'id', order: 'ASC' }, filter: {} }));
    await record(name, 'getList q', () =>
        provider.getList('posts', { pagination: page(1, 10), sort: { field: 'id', order: 'ASC' }, filter: { q: 'e' } }));
    await record(name, 'getList field filter', () =>
        provider.getList('posts', { pagination: page(1, 10), sort: { field: 'id', order: 'ASC' }, filter: { views: 5 } }));
    await record(name, 'getOne', () => provider.getOne('posts', { id: 1 }));
    await record(name, 'getMany', () => provider.getMany('posts', { ids: [1, 3] }));
    await record(name, 'getManyReference', () =>
        provider.getManyReference('comments', { target: 'postId', id: 1, pagination: page(1, 10), sort: { field: 'id', order: 'ASC' }, filter: {} }));
    await record(name, 'create', () => provider.create('posts', { data: { title: 'epsilon', views: 7 } }));
    await record(name, 'update', () =>
        provider.update('posts', { id: 2, data: { id: 2, title: 'beta 2', views: 11 }, previousData: { id: 2 } }));
    await record(name, 'updateMany', () => provider.updateMany('posts', { ids: [3, 4], data: { title: 'renamed', views: 0 } }));
    await record(name, 'delete', () => provider.delete('posts', { id: 5, previousData: { id: 5 } }));
    await record(name, 'deleteMany', () => provider.deleteMany('posts', { ids: [3, 4] }));
    await record(name, 'getList after', () =>
        provider.getList('posts', { pagination: page(1, 50), sort: { field: 'id', order: 'ASC' }, filter: {} }));
}

async function refine(provider) {
    const name = 'refine simple-rest';
    const pagination = { currentPage: 1, pageSize: 2, current: 1 };
    await record(name, 'getList sorted page', () =>
        provider.getList({ resource: 'posts', pagination, sorters: [{ field: 'views', order: 'desc' }, { field: 'id', order: 'asc' }] }));
    await record(name, 'getList gte', () =>
        provider.getList({ resource: 'posts', pagination: { currentPage: 1, pageSize: 10, current: 1 }, filters: [{ field: 'views', operator: 'gte', value: 5 }] }));
    await record(name, 'getList contains', () =>
        provider.getList({ resource: 'posts', pagination: { currentPage: 1, pageSize: 10, current: 1 }, filters: [{ field: 'title', operator: 'contains', value: 'AL' }] }));
    await record(name, 'getList ne', () =>
        provider.getList({ resource: 'posts', pagination: { currentPage: 1, pageSize: 10, current: 1 }, filters: [{ field: 'views', operator: 'ne', value: 5 }] }));
    await record(name, 'getList q', () =>
        provider.getList({ resource: 'posts', pagination: { currentPage: 1, pageSize: 10, current: 1 }, filters: [{ field: 'q', operator: 'eq', value: 'e' }] }));
    await record(name, 'getOne', () => provider.getOne({ resource: 'posts', id: 1 }));
    await record(name, 'getMany', () => provider.getMany({ resource: 'posts', ids: [1, 3] }));
    await record(name, 'create', () => provider.create({ resource: 'posts', variables: { title: 'zeta', views: 3 } }));
    await record(name, 'update', () => provider.update({ resource: 'posts', id: 1, variables: { views: 99 } }));
    await record(name, 'deleteOne', () => provider.deleteOne({ resource: 'posts', id: 2 }));
    await record(name, 'getList after', () =>
        provider.getList({ resource: 'posts', pagination: { currentPage: 1, pageSize: 50, current: 1 }, sorters: [{ field: 'id', order: 'asc' }] }));
}

const which = process.argv[3] ?? 'all';
if (which === 'all' || which === 'json-server') await reactAdmin('ra-data-json-server', jsonServerProvider(base));
if (which === 'all' || which === 'simple-rest') await reactAdmin('ra-data-simple-rest', simpleRestProvider(base));
if (which === 'all' || which === 'refine') await refine(refineSimpleRest(base));
